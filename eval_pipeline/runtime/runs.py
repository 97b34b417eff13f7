"""Running one selection of a rubric group for one checkpoint, as a Dagster run: in this process, or on a
deployment's workers (``EVAL_DAGSTER_URL``), and reading back how it ended. What to run, and in which order, is
runtime/runner.py's (from the graph); this module only operates runs: tags, Ctrl-C, dead runs, failures in one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import dagster as dg

from eval_pipeline.core import interrupts
from eval_pipeline.core.contracts import BUDGET_TAG
from eval_pipeline.core.processes import pid_alive
from eval_pipeline.defs.inflight import (
    IN_FLIGHT,
    RANGE_END,
    RANGE_START,
    runs_of_checkpoint,
)
from eval_pipeline.defs.partitions import CHECKPOINTS_PARTITION
from eval_pipeline.ingest.checkpoints import read_checkpoint
from eval_pipeline.runtime.outcome import RunOutcome
from eval_pipeline.storage.backends.lake import failure_hint


def register_checkpoints(instance: dg.DagsterInstance, checkpoint_ids: list[str]) -> list[str]:
    existing = set(instance.get_dynamic_partitions(CHECKPOINTS_PARTITION))
    new = [c for c in checkpoint_ids if c not in existing]
    if new:
        instance.add_dynamic_partitions(CHECKPOINTS_PARTITION, new)
    return new


def in_flight_elsewhere(
    instance: dg.DagsterInstance, checkpoint_id: str, rubrics: Collection[str] | None = None
) -> str | None:
    """The id of a run of this checkpoint that is queued or running in another process, or None; with
    ``rubrics``, only a run that evaluates one of them (a run of other rubric groups of the checkpoint is not
    in the way: two commands may evaluate a checkpoint's groups side by side)."""
    mine = None if rubrics is None else set(rubrics)
    for run in runs_of_checkpoint(instance, checkpoint_id, IN_FLIGHT, limit=50):
        theirs = {r for r in run.tags.get("eval/rubrics", "").split(",") if r}
        if mine is not None and theirs and not theirs & mine:
            continue
        if run.tags.get(PID_TAG) != str(os.getpid()) or run.tags.get(HOST_TAG) != socket.gethostname():
            return run.run_id
    return None


HOST_TAG, PID_TAG = "eval/host", "eval/pid"  # who runs an in-process run: a dead one is found and reaped
WORKER_TAG = "eval/worker"  # the distributed profile's worker that executed a run (runtime/celery_app.py sets it)
INTERRUPTED = "DagsterExecutionInterruptedError"  # what Dagster's own Ctrl-C handler raises inside a step


def _interrupted(cls_name: str, message: str) -> bool:
    """An error that is a signal's doing: Dagster's interrupt, Python's, DuckDB's "Query interrupted" (also when
    DuckDB wraps Dagster's: "_duckdb.Error: DagsterExecutionInterruptedError")."""
    return cls_name in (INTERRUPTED, "KeyboardInterrupt") or any(
        word in message for word in (INTERRUPTED, "KeyboardInterrupt", "Query interrupted", "INTERRUPT Error")
    )


def step_failures(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """Each failed step of a run as one line: its key and the first line of the error that ended it."""
    out = []
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        event = record.dagster_event
        data = getattr(event, "step_failure_data", None) if event else None
        err = getattr(data, "error", None)
        while err is not None and getattr(err, "cause", None) is not None and "Error occurred while" in err.message:
            err = err.cause  # past Dagster's wrapper, to the user's error
        if err is not None and _interrupted(err.cls_name, err.message):
            out.append(f"{event.step_key if event else '?'}: interrupted (Ctrl-C)")
            continue
        message = (err.message if err is not None else record.user_message or "failed").strip().splitlines()
        first = message[0] if message else "failed"
        if first.startswith("dagster."):
            first = first.split(": ", 1)[-1]  # "dagster._core.definitions.events.Failure: <why>": the why
        first = failure_hint(first) or first  # a lake data file deleted outside the pipeline, a store that stopped
        out.append(f"{event.step_key if event else '?'}: {first}")
    return out


def launcher(run: dg.DagsterRun) -> int | None:
    """The pid of the process on this machine that ran ``run`` in-process (tagged eval/host, eval/pid), when it is
    another process than this one; None otherwise (another machine's run, the daemon's, this process's)."""
    pid = run.tags.get(PID_TAG, "")
    if run.tags.get(HOST_TAG) != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return None
    return int(pid)


def reap_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Runs this machine started in-process (tagged eval/host, eval/pid) whose process is gone, killed with
    SIGKILL or by the OOM killer: each is marked failed and its concurrency-pool slots are freed, so the next run
    does not wait forever for a slot a dead process holds. Runs of other machines and live ones are left alone
    (the daemon's run monitoring watches the runs it launched)."""
    reaped = []
    active = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.CANCELING]
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=active)):
        pid = launcher(run)
        if pid is None or pid_alive(pid):
            continue
        instance.report_run_failed(run, f"the process that ran it (pid {pid}) is gone: killed mid-run")
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reaped.append(run.run_id)
    return reaped


class Interrupted:
    """Set when Ctrl-C or SIGTERM arrived during a run, whatever the run then did with it (Dagster turns the
    signal into its own error inside a step, DuckDB into "Query interrupted": core.interrupts notes it)."""

    def __init__(self) -> None:
        self.flag = False

    def check(self) -> bool:
        self.flag |= interrupts.requested()
        return self.flag


@contextmanager
def interruptible() -> Iterator[Interrupted]:
    """Ctrl-C and SIGTERM record themselves, then interrupt as Ctrl-C does; a caller checks ``check()`` after
    each run, because a step may turn the interrupt into an ordinary failure."""
    state = Interrupted()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        state.flag = True
        raise KeyboardInterrupt

    try:
        for sig in previous:
            signal.signal(sig, on_signal)
    except ValueError:  # not the main thread: leave the signals as they are
        yield state
        return
    try:
        with interrupts.watching():
            yield state
            state.check()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class Batch:
    """One command's checkpoints and what every run of it shares."""

    defs: dg.Definitions
    instance: dg.DagsterInstance
    assets: list[dg.AssetsDefinition]
    raise_on_error: bool
    log_level: str
    # the deployment's webserver when runs execute on its workers (EVAL_DAGSTER_URL); None: in this process
    remote: str | None = None
    # (checkpoint, rubric, selection): the run submitted for it, and when
    launched: dict[tuple[str, str, str], tuple[str, float]] = field(default_factory=dict)
    # the command's id when its runs share one judge budget (core.contracts.BUDGET_TAG); "": each run its own
    budget_scope: str = ""

    def scope_tags(self) -> dict[str, str]:
        return {BUDGET_TAG: self.budget_scope} if self.budget_scope else {}


def partition_tags(ckpts: list[str]) -> dict[str, str]:
    """The tags that make a run one of ``ckpts`` (one: its partition; several, consecutive in the partitions'
    order: their range; none: the assets over every checkpoint)."""
    if not ckpts:
        return {}
    if len(ckpts) == 1:
        return {"dagster/partition": ckpts[0]}
    return {RANGE_START: ckpts[0], RANGE_END: ckpts[-1]}


def _tags(ckpt_id: str, model: str, names: list[str]) -> dict[str, str]:
    mine = {"eval/checkpoint": ckpt_id, "eval/model": model} if ckpt_id else {}
    return {**mine, "eval/rubrics": ",".join(names)}


def _run_tags(ckpts: list[str], model: str, names: list[str]) -> dict[str, str]:
    """A run's own tags: the checkpoint (several: the first and last, ``eval/checkpoints`` all of them)."""
    tags = _tags(ckpts[0] if len(ckpts) == 1 else "", model, names)
    if len(ckpts) > 1:
        tags["eval/checkpoints"] = ",".join(ckpts)[:4000]
    return tags


def _client(url: str) -> Any:
    from urllib.parse import urlsplit

    from dagster_graphql import DagsterGraphQLClient

    parts = urlsplit(url if "://" in url else f"http://{url}")
    return DagsterGraphQLClient(
        parts.hostname or "127.0.0.1", port_number=parts.port, use_https=parts.scheme == "https", timeout=60
    )


def launch(batch: Batch, ckpts: list[str], model: str, names: list[str], selection: dg.AssetSelection) -> list[str]:
    """Submit ``selection`` for checkpoints ``ckpts`` (consecutive partitions; none: the assets over every
    checkpoint) to the deployment at ``batch.remote`` (its queue, its launcher, its workers) as one run per rubric,
    so workers share a range's rubrics as they share ranges; the run ids. Submitted once per range, rubric and
    selection in a command: ``_run`` then waits for them."""
    ids = []
    for name in names:
        key = (",".join(ckpts), name, repr(selection))
        if key not in batch.launched:
            keys = sorted(
                (selection & dg.AssetSelection.groups(name)).resolve(batch.assets), key=lambda k: k.to_user_string()
            )
            tags = {**_run_tags(ckpts, model, [name]), **partition_tags(ckpts)} if ckpts else _tags("", model, [name])
            tags.update(batch.scope_tags())
            run_id = _client(batch.remote or "").submit_job_execution(
                "__ASSET_JOB",
                tags=tags,
                asset_selection=keys,
                run_config={"loggers": {"console": {"config": {"log_level": batch.log_level}}}},
            )
            batch.launched[key] = (run_id, time.perf_counter())
        ids.append(batch.launched[key][0])
    return ids


FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def _run_remote(
    batch: Batch, ckpts: list[str], model: str, names: list[str], selection: dg.AssetSelection
) -> RunOutcome:
    """The runs submitted for these checkpoints and selection (submitted now when they were not yet), waited for,
    as one outcome. On Ctrl-C every run this command submitted and that has not finished is terminated."""
    ckpt_id = ckpts[0] if len(ckpts) == 1 else ""
    run_ids = launch(batch, ckpts, model, names, selection)
    t0 = min(batch.launched[(",".join(ckpts), n, repr(selection))][1] for n in names)
    runs: dict[str, dg.DagsterRun] = {}
    try:
        while len(runs) < len(run_ids):  # one query a tick for the runs not finished yet
            waiting = [r for r in run_ids if r not in runs]
            for run in batch.instance.get_runs(filters=dg.RunsFilter(run_ids=waiting, statuses=list(FINISHED))):
                runs[run.run_id] = run
            if len(runs) < len(run_ids):
                time.sleep(0.5)
    except KeyboardInterrupt:
        for other, _t in batch.launched.values():
            found = batch.instance.get_run_by_id(other)
            if found is not None and found.status not in FINISHED:
                with contextlib.suppress(Exception):  # the webserver gone as well: the daemon's monitoring ends it
                    _client(batch.remote or "").terminate_run(other)
        seconds = time.perf_counter() - t0
        return RunOutcome(ckpt_id, names, False, seconds, run_ids[-1], ["interrupted"], True, run_ids=run_ids)
    failures: list[str] = []
    notes: list[str] = []
    for run_id in run_ids:
        run = runs[run_id]
        if run.status != dg.DagsterRunStatus.SUCCESS:
            failures += step_failures(batch.instance, run_id) or [run_failure(batch.instance, run)]
        notes += remote_notes(batch.instance, run)
    success = all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs.values())
    outcome = RunOutcome(ckpt_id, names, success, time.perf_counter() - t0, run_ids[-1], failures, run_ids=run_ids)
    outcome.notes = notes
    return outcome


def run_failure(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """A run that ended without a failed step, in one line: why the instance ended it (a run monitoring's time-out,
    a launcher's error), else its status."""
    ended = instance.all_logs(run.run_id, of_type={dg.DagsterEventType.RUN_FAILURE, dg.DagsterEventType.RUN_CANCELED})
    why = next((e.message for e in reversed(ended) if e.message), None)
    return f"run {run.run_id[:8]} {run.status.value.lower()}" + (f": {why.strip().splitlines()[0]}" if why else "")


def remote_notes(instance: dg.DagsterInstance, run: dg.DagsterRun) -> list[str]:
    """What the console says of a run a worker executed beyond its outcome: that its worker died and the daemon's
    run monitoring resumed it (how often, and where it finished)."""
    events = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
    died = [e for e in events if (e.message or "").startswith("Detected run worker status FAILED")]
    if not died:
        return []
    ended = (
        f"finished on {run.tags.get(WORKER_TAG, 'another worker')}"
        if run.status == dg.DagsterRunStatus.SUCCESS
        else f"then {run.status.value.lower()}"
    )
    return [
        f"run {run.run_id[:8]}: its worker died {len(died)} time(s); resumed by the daemon's run monitoring, {ended}"
    ]


def run(batch: Batch, ckpts: list[str], model: str, names: list[str], selection: dg.AssetSelection) -> RunOutcome:
    """One run of ``selection`` (within the checkpoints' rubric groups) for the checkpoints ``ckpts`` (consecutive
    partitions, processed together by each partitioned asset; none: the assets over every checkpoint): in this
    process, or on the deployment's workers (``batch.remote``). The outcome's checkpoint is the only one, or empty."""
    if batch.remote:
        return _run_remote(batch, ckpts, model, names, selection)
    ckpt_id = ckpts[0] if len(ckpts) == 1 else ""
    t0 = time.perf_counter()
    try:
        result = dg.materialize(
            [*batch.assets, *(batch.defs.asset_checks or [])],
            instance=batch.instance,
            partition_key=ckpt_id or None,
            resources=batch.defs.resources or {},
            selection=selection,
            tags={
                **_run_tags(ckpts, model, names),
                **partition_tags(ckpts),
                **batch.scope_tags(),
                HOST_TAG: socket.gethostname(),
                PID_TAG: str(os.getpid()),
            },
            raise_on_error=batch.raise_on_error,
            run_config={"loggers": {"console": {"config": {"log_level": batch.log_level}}}},
        )
    except KeyboardInterrupt:
        return RunOutcome(ckpt_id, names, False, time.perf_counter() - t0, "", ["interrupted"], True)
    failures = [] if result.success else step_failures(batch.instance, result.run_id)
    interrupted = any(f.endswith("interrupted (Ctrl-C)") for f in failures)
    seconds = time.perf_counter() - t0
    return RunOutcome(
        ckpt_id, names, result.success, seconds, result.run_id, failures, interrupted, run_ids=[result.run_id]
    )


def model_of(root: Path, ckpt_id: str) -> str:
    """The model a checkpoint's manifest names (for a run's tags); a folder gone since says so."""
    try:
        return read_checkpoint(root / ckpt_id).model
    except Exception:  # noqa: BLE001 - a folder gone since: the run's tag says so, the warehouse has its rows
        return "(folder gone)"
