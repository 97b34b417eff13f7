"""What ``eval-pipeline run`` / ``backfill``, ``make demo`` and the tests launch: a client of the asset graph, which
decides nothing the graph does not say.

A command (1) reads again the ``human_ratings`` partitions the ratings sensor would (the files that concern them
changed since), in one run with the decisions across checkpoints of their rubrics, and (2) runs its checkpoints'
rubric groups, up to ``EVAL_BACKFILL_CHUNK`` checkpoints a run (consecutive partitions: the graph's backfill
policy). A group is its checkpoints' partitioned assets and the assets over every checkpoint downstream of them
(the pools and the decisions, defs/assets/decisions.py), so each run ends with every checkpoint decided from what it
wrote: nothing it changed is left stale, and no further run is needed (the automation conditions, evaluated by the
deployment's sensor, request nothing after it). Each checkpoint's outcome is reported once its run has ended.
Ctrl-C stops the whole sequence: a checkpoint interrupted mid-run is reported as such and no further run starts.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ParamSpec

import dagster as dg

from eval_pipeline.core import settings
from eval_pipeline.defs.asset import evaluation
from eval_pipeline.defs.partitions import CHECKPOINTS_PARTITION
from eval_pipeline.defs.ratings_sensor import by_checkpoint, ratings_key, stale_ratings
from eval_pipeline.defs.sensors import redraw
from eval_pipeline.ingest.checkpoints import read_checkpoint
from eval_pipeline.runtime.command import claim
from eval_pipeline.runtime.dagster_private import compute_log_helpers_off_the_terminal
from eval_pipeline.runtime.outcome import Ranges, RunOutcome
from eval_pipeline.runtime.runs import Batch, in_flight_elsewhere, interruptible, launch, model_of, run
from eval_pipeline.storage.backends.lake import failure_hint

P = ParamSpec("P")


def _todo(batch: Batch, checkpoint_ids: list[str], rubrics: set[str] | None) -> list[tuple[str, str, list[str]]]:
    """(checkpoint, model, rubric groups it has a file for) of each checkpoint with at least one."""
    checkpoints = (batch.defs.resources or {})["checkpoints"]
    groups = {k.path[0] for a in batch.assets for k in a.keys}
    todo = []
    for ckpt_id in checkpoint_ids:
        ckpt = read_checkpoint(checkpoints.folder(ckpt_id) / ckpt_id)
        names = sorted(set(ckpt.rubric_files) & groups & (rubrics or groups))
        if names:
            todo.append((ckpt_id, ckpt.model, names))
    return todo


def _stale_ratings(batch: Batch, command: set[str]) -> dict[str, list[str]]:
    """The ratings sensor's question, asked now: checkpoints outside the command whose ratings files changed (and
    the rubrics whose ratings of each)."""
    resources = batch.defs.resources or {}
    registered = set(batch.instance.get_dynamic_partitions(CHECKPOINTS_PARTITION))
    rubrics = sorted({k.path[0] for a in batch.assets for k in a.keys})
    found = stale_ratings(resources["warehouse"].get(), rubrics, resources["ratings"].folder(), registered)
    return {
        c: names
        for c, names in by_checkpoint(found).items()
        if c not in command and in_flight_elsewhere(batch.instance, c) is None
    }


def _reread(batch: Batch, ckpts: list[str], names: list[str]) -> RunOutcome:
    """One run that reads again these checkpoints' ratings of these rubrics and decides across every checkpoint of
    them after (the assets over every checkpoint of their groups)."""
    across = {k for a in batch.assets if a.partitions_def is None for k in a.keys}
    keys = [ratings_key(r) for r in names] + sorted(across & evaluation(names).resolve(batch.assets), key=str)
    model = model_of((batch.defs.resources or {})["checkpoints"].folder(ckpts[0]), ckpts[0]) if len(ckpts) == 1 else ""
    outcome = run(batch, ckpts, model, names, dg.AssetSelection.assets(*keys).without_checks())
    outcome.purpose = "ratings"
    return outcome


@dataclass(frozen=True)
class Started:
    """A checkpoint's run is starting."""

    checkpoint_id: str


@dataclass(frozen=True)
class Followed:
    """Another checkpoint was decided again: its ratings files changed, so the graph read them again (one outcome
    per checkpoint; its ``purpose`` is "ratings")."""

    outcome: RunOutcome


@dataclass(frozen=True)
class Settled:
    """A checkpoint of the command has its outcome: its run ended (every run of the command has, by now)."""

    outcome: RunOutcome


@dataclass(frozen=True)
class Interrupted:
    """Ctrl-C or SIGTERM came at some moment of the command (a run's outcome may not show it: one between runs
    interrupts no run)."""


Event = Started | Followed | Settled | Interrupted


def evaluation_events(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    checkpoint_ids: list[str],
    rubrics: set[str] | None = None,
    raise_on_error: bool = False,
    log_level: str = "DEBUG",
    budget_scope: str = "",
    claimed: bool = False,
) -> Iterator[Event]:
    """Evaluate ``checkpoint_ids`` in order (see the module), saying what happens as it happens: the runs that
    read other checkpoints' ratings again (``Followed``), each run's start (``Started``), then one ``Settled`` per
    checkpoint once every run has ended, and ``Interrupted`` last when a signal came. The report is drawn when the
    events are all told (the last outcome with a run carries it). ``budget_scope``: the command's id, when its
    calls of this function share one judge budget (the runs of `run --wait`: core.contracts.BUDGET_TAG).
    ``claimed``: the caller registered the checkpoints and reaped the dead runs already (runtime.command.claim)."""
    compute_log_helpers_off_the_terminal()  # a terminal's Ctrl-C reaches the command, not Dagster's helpers
    if not claimed:
        claim(instance, checkpoint_ids)
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    batch = Batch(
        defs, instance, assets, raise_on_error, log_level, remote=settings.dagster_url(), budget_scope=budget_scope
    )
    todo = _todo(batch, checkpoint_ids, rubrics)
    wh = (defs.resources or {})["warehouse"].get()
    outcomes: dict[str, RunOutcome] = {}
    models = {c: model for c, model, _ in todo}
    with interruptible() as interrupt, wh.lingering():
        stale = {} if interrupt.check() else _stale_ratings(batch, {c for c, _, _ in todo})
        for ckpts, names in Ranges(instance, [(c, "", n) for c, n in sorted(stale.items())]).runs():
            reread = _reread(batch, ckpts, names)
            for c in ckpts:
                yield Followed(reread.of(c, [r for r in names if r in stale[c]]))
            interrupt.flag |= reread.interrupted
            if interrupt.flag:
                break
        ranges = Ranges(instance, todo).runs()
        if batch.remote:  # on workers: every range submitted at once, then waited for in order
            for ckpts, names in ranges:
                launch(batch, ckpts, models[ckpts[0]] if len(ckpts) == 1 else "", names, evaluation(names))
        for ckpts, names in ranges:
            if interrupt.check():
                break
            for c in ckpts:
                yield Started(c)
            outcome = run(batch, ckpts, models[ckpts[0]] if len(ckpts) == 1 else "", names, evaluation(names))
            for c in ckpts:
                outcomes[c] = outcome.of(c, names)
            interrupt.flag |= outcome.interrupted
        for outcome in outcomes.values():
            outcome.interrupted |= interrupt.flag and not outcome.success
            yield Settled(outcome)
        if interrupt.check():
            yield Interrupted()
    ran = [o for o in outcomes.values() if o.run_id]
    if ran and not interrupt.flag:  # the report, drawn once every run has ended (the last outcome carries it)
        ran[-1].report, error = redraw(defs.resources or {})
        ran[-1].report_error = (failure_hint(error) or error) if error else None
        if error:
            print(f"report not written: {ran[-1].report_error}", file=sys.stderr, flush=True)


def _outcomes(events: Callable[P, Iterator[Event]]) -> Callable[P, list[RunOutcome]]:
    def outcomes(*args: P.args, **kwargs: P.kwargs) -> list[RunOutcome]:
        """Evaluate the checkpoints as ``evaluation_events`` does, and return their outcomes, one each."""
        return [e.outcome for e in events(*args, **kwargs) if isinstance(e, Settled)]

    return outcomes


materialize_checkpoints = _outcomes(evaluation_events)
