"""What an evaluating command asks of the instance and waits on, told to the console as it happens (#76): the
console prints, this module polls.

- ``claim``: the command's checkpoints registered as partitions (the checkpoint sensor leaves registered ones
  alone) and the runs whose process died reaped (a dead run is not "in flight"); the one place either happens.
- ``busy``: the checkpoints another run is evaluating now (the UI, the sensor, another command).
- ``follow``: wait for such a run, then for what decides its checkpoint again after it, and say how it stands.
- ``batch_waits``: ``run --wait``'s loop over judge batches, yielding each thing to say or do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline.defs.inflight import IN_FLIGHT, concerns_checkpoint
from eval_pipeline.runtime.runs import in_flight_elsewhere, launcher, reap_dead_runs, register_checkpoints

if TYPE_CHECKING:
    from eval_pipeline.storage.warehouse import Warehouse

SETTLE_POLL_S = 0.5


def claim(instance: dg.DagsterInstance, checkpoint_ids: list[str]) -> None:
    """``checkpoint_ids`` registered (only the new ones) and the dead runs reaped, before anything is launched."""
    reap_dead_runs(instance)
    register_checkpoints(instance, checkpoint_ids)


def busy(instance: dg.DagsterInstance, checkpoint_ids: list[str], rubrics: Collection[str] | None) -> dict[str, str]:
    """The checkpoints of ``checkpoint_ids`` another process is evaluating now (of ``rubrics``), with its run."""
    found = {c: in_flight_elsewhere(instance, c, rubrics) for c in checkpoint_ids}
    return {c: run_id for c, run_id in found.items() if run_id}


@dataclass(frozen=True)
class Followed:
    """How another run of a checkpoint stands once waited on: ``state`` "in flight" (not ended in time), "failed"
    (failed, cancelled or gone), "unsettled" (ended, but what decides the checkpoint again after it had not, in
    time) or "settled" (its stored verdict is the one every reader sees)."""

    run: dg.DagsterRun | None
    state: str

    @property
    def status(self) -> str:
        return self.run.status.value.lower() if self.run is not None else "gone"


def follow(instance: dg.DagsterInstance, run_id: str, checkpoint_id: str, wait_s: float) -> Followed:
    """Wait at most ``wait_s`` for ``run_id`` to end, then for its checkpoint to settle: the command that launched
    it (its process, on this machine) gone, and the deployment settled for it (defs/automation.py's ``settling``:
    no run of it or of the decisions in flight, the automation sensor evaluated after the last run ended and
    requesting nothing)."""
    from eval_pipeline.core.processes import pid_alive
    from eval_pipeline.defs.automation import settling

    deadline = time.monotonic() + wait_s
    run = instance.get_run_by_id(run_id)
    while run is not None and run.status in IN_FLIGHT and time.monotonic() < deadline:
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        run = instance.get_run_by_id(run_id)
    if run is not None and run.status in IN_FLIGHT:
        return Followed(run, "in flight")
    if run is None or run.status != dg.DagsterRunStatus.SUCCESS:
        return Followed(run, "failed")
    pid = launcher(run)
    while pid is not None and pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_S)
    while time.monotonic() < deadline:
        if settling(instance, concerns_checkpoint(checkpoint_id)).settled:
            return Followed(run, "settled")
        time.sleep(SETTLE_POLL_S)
    return Followed(run, "unsettled")


@dataclass(frozen=True)
class BatchWait:
    """One step of ``batch_waits``: "waiting" (``lines``: the batches still working, a poll's sleep follows),
    "ready" (``checkpoints`` to evaluate again now: their batches ended) or "nothing left" (``count`` results still
    pending with no batch open: the wait ends)."""

    kind: str
    checkpoints: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    count: int = 0


def batch_waits(wh: Warehouse, waiting: Callable[[], set[tuple[str, str]]], poll_s: float) -> Iterator[BatchWait]:
    """Until nothing ``waiting()`` names ((rubric, checkpoint) pending judge) waits on a judge batch: every
    ``poll_s`` seconds, which batches ended (the batch sensor's question, defs.batch_sensor.due). The caller
    evaluates a "ready" step's checkpoints before asking for the next step (that reads the results, and may submit
    the second asks of what a batch did not answer)."""
    from eval_pipeline.defs.batch_sensor import due
    from eval_pipeline.judge.batch import pending_text

    idle = False  # the last look found no batch open for what waits: evaluated once more since
    while pending := waiting():
        standing = due(wh, {c for _, c in pending})
        ready = sorted({c for (rubric, c) in standing.due if (rubric, c) in pending})
        if not ready and not standing.working and not standing.unreachable:
            if idle:  # evaluated again with nothing open, and still pending: nothing left to wait on
                yield BatchWait("nothing left", count=len(pending))
                return
            idle, ready = True, sorted({c for _, c in pending})
        elif not ready:
            working = [
                f"{s['rubric']} {s['checkpoint_id']} {s['step']}: {pending_text(s).removeprefix('pending: ')}"
                for s in standing.working
            ]
            yield BatchWait("waiting", lines=[*working[:3], *standing.unreachable], count=len(working))
            time.sleep(poll_s)
            continue
        else:
            idle = False
        yield BatchWait("ready", checkpoints=ready)
