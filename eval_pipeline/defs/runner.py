"""What ``eval-pipeline run`` / ``backfill``, ``make demo`` and the tests launch: a client of the asset graph, which
decides nothing the graph does not say.

A command (1) reads again the ``human_ratings`` partitions the ratings sensor would (their files changed since),
(2) runs its checkpoints' rubric groups, up to ``EVAL_BACKFILL_CHUNK`` checkpoints a run (consecutive partitions,
the graph's backfill policy), each run deciding across every checkpoint at its end (the unpartitioned decisions),
and (3) lets Dagster's automation settle: it evaluates the graph's automation conditions (defs/automation.py) and
launches what they still request, until nothing is. The conditions are armed by one evaluation before the first
run, so only what this command changed is followed.
Each checkpoint's outcome is reported once it has settled. Ctrl-C stops the whole sequence: a checkpoint interrupted
mid-run is reported as such, no further run starts, and nothing is settled.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable

import dagster as dg

from eval_pipeline.core import settings
from eval_pipeline.defs.asset import evaluation
from eval_pipeline.defs.dagster_private import compute_log_helpers_off_the_terminal, dynamic_partitions_read_once
from eval_pipeline.defs.partitions import CHECKPOINTS_PARTITION
from eval_pipeline.defs.ratings_sensor import by_checkpoint, ratings_key, stale_ratings
from eval_pipeline.defs.runs import (
    Batch,
    Ranges,
    Interrupted,
    RunOutcome,
    automation_daemon_alive,
    in_flight_elsewhere,
    interruptible,
    launch,
    model_of,
    reap_dead_runs,
    register_checkpoints,
    run,
    wait_until_settled,
)
from eval_pipeline.ingest.checkpoints import read_checkpoint
from eval_pipeline.publish.report import redraw_report
from eval_pipeline.storage.backends.lake import failure_hint

SETTLE_ROUNDS = 8  # evaluations of the automation conditions at most; the graph's depth needs about three
QUIET_S, SETTLE_TIMEOUT_S = 40.0, 1800.0  # a deployment that settles: twice its automation sensor's interval
POOL = ""  # the "checkpoint" of a run of the assets over every checkpoint (unpartitioned)


class Automation:
    """The graph's automation conditions, evaluated against the instance with this command's cursor."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
        self.defs, self.instance = defs, instance
        self.last = self._evaluate(None)  # armed: requests nothing

    def _evaluate(self, last: dg.EvaluateAutomationConditionsResult | None) -> dg.EvaluateAutomationConditionsResult:
        with warnings.catch_warnings(), dynamic_partitions_read_once(self.instance):
            warnings.simplefilter("ignore", dg.BetaWarning)  # Dagster's own selection in it: not the user's business
            return dg.evaluate_automation_conditions(self.defs, self.instance, cursor=last.cursor if last else None)

    def requested(self) -> dict[str, list[dg.AssetKey]]:
        """What the conditions request now, by partition (POOL: the unpartitioned assets), in key order."""
        result = self.last = self._evaluate(self.last)
        out: defaultdict[str, list[dg.AssetKey]] = defaultdict(list)
        for asset in self.defs.assets or []:
            if isinstance(asset, dg.AssetsDefinition):
                for key in asset.keys:
                    for partition in result.get_requested_partitions(key):
                        out[partition or POOL].append(key)
        return {p: sorted(keys, key=lambda k: k.to_user_string()) for p, keys in sorted(out.items())}


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


def _other(batch: Batch, ckpts: list[str], keys: list[dg.AssetKey], purpose: str) -> RunOutcome:
    """A run of ``keys`` for checkpoints outside the command (none: of the assets over every checkpoint), as the
    graph asked for it."""
    names = sorted({k.path[0] for k in keys})
    model = model_of((batch.defs.resources or {})["checkpoints"].folder(ckpts[0]), ckpts[0]) if len(ckpts) == 1 else ""
    outcome = run(batch, ckpts, model, names, _with_checks(batch.defs, keys))
    outcome.purpose = purpose
    return outcome


def _with_checks(defs: dg.Definitions, keys: list[dg.AssetKey]) -> dg.AssetSelection:
    """``keys`` and the asset checks that read them: those on the keys (selected with them) and those shown on
    another asset that read one of them (a gate's check shown on ``judge_scores`` reads ``gates``)."""
    wanted = set(keys)
    checks = [
        spec.key
        for definition in defs.asset_checks or []
        for spec in definition.check_specs
        if wanted & {d.asset_key for d in spec.additional_deps}
    ]
    return dg.AssetSelection.assets(*keys) | dg.AssetSelection.checks(*checks)


def _stale_ratings(batch: Batch, command: set[str]) -> dict[str, list[str]]:
    """The ratings sensor's question, asked now: checkpoints outside the command whose ratings files changed (and
    the rubrics whose ratings of each)."""
    resources = batch.defs.resources or {}
    registered = set(batch.instance.get_dynamic_partitions(CHECKPOINTS_PARTITION))
    rubrics = sorted({k.path[0] for a in batch.assets for k in a.keys})
    found = stale_ratings(resources["warehouse"].get(), rubrics, resources["ratings"], registered)
    return {
        c: names
        for c, names in by_checkpoint(found).items()
        if c not in command and in_flight_elsewhere(batch.instance, c) is None
    }


def _across(batch: Batch, names: list[str]) -> list[dg.AssetKey]:
    """The assets over every checkpoint of these rubric groups (the pools and the decisions), an evaluation's."""
    across = {k for a in batch.assets if a.partitions_def is None for k in a.keys}
    return sorted(across & evaluation(names).resolve(batch.assets), key=lambda k: k.to_user_string())


def _settle(
    batch: Batch,
    automation: Automation,
    outcomes: dict[str, RunOutcome],
    interrupt: Interrupted,
    starting: Callable[[str], None],
    followed: Callable[[RunOutcome], None],
) -> None:
    """Launch what the automation conditions request until they request nothing (at most SETTLE_ROUNDS rounds), none
    after Ctrl-C: a command's checkpoint's runs fold into its outcome, the others' go to ``followed``."""
    for _ in range(SETTLE_ROUNDS):
        requested = {} if interrupt.check() else automation.requested()
        for ckpt_id, keys in requested.items():
            if interrupt.check():
                return
            starting(ckpt_id)
            outcome = _other(
                batch,
                [ckpt_id] if ckpt_id else [],
                keys,
                "settle" if ckpt_id in outcomes else "pool" if ckpt_id == POOL else "decide again",
            )
            if ckpt_id in outcomes:
                outcomes[ckpt_id].absorb(outcome)
            else:
                followed(outcome)
            # a run Ctrl-C stopped stops the command, whatever became of the signal on its way (Dagster takes
            # SIGINT over while it executes a run): nothing further starts
            interrupt.flag |= outcome.interrupted
            if interrupt.flag:
                return
        if not requested:
            return


def materialize_checkpoints(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    checkpoint_ids: list[str],
    rubrics: set[str] | None = None,
    raise_on_error: bool = False,
    log_level: str = "DEBUG",
    on_outcome: Callable[[RunOutcome], None] | None = None,
    on_start: Callable[[str], None] | None = None,
    on_followed: Callable[[RunOutcome], None] | None = None,
    on_interrupted: Callable[[], None] | None = None,
) -> list[RunOutcome]:
    """Evaluate ``checkpoint_ids`` in order and let the graph settle (see the module); one outcome each, given to
    ``on_outcome`` once settled. Runs the graph asked for outside the command go to ``on_followed``;
    ``on_interrupted`` is called when Ctrl-C or SIGTERM came at any moment of it (a run's outcome may not show it:
    one between runs, or during an evaluation of the automation, interrupts no run)."""
    compute_log_helpers_off_the_terminal()  # a terminal's Ctrl-C reaches the command, not Dagster's helpers
    reap_dead_runs(instance)
    register_checkpoints(instance, checkpoint_ids)
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    batch = Batch(defs, instance, assets, raise_on_error, log_level, remote=settings.dagster_url())
    todo = _todo(batch, checkpoint_ids, rubrics)
    # a daemon that evaluates the automation sensor settles what the command's runs changed; else the command does
    automation = None if batch.remote or automation_daemon_alive(instance) else Automation(defs, instance)
    since = time.time()
    wh = (defs.resources or {})["warehouse"].get()
    starting, followed = on_start or (lambda _c: None), on_followed or (lambda _o: None)
    outcomes: dict[str, RunOutcome] = {}
    models = {c: model for c, model, _ in todo}
    with interruptible() as interrupt, wh.lingering():
        stale = {} if interrupt.check() else _stale_ratings(batch, {c for c, _, _ in todo})
        for ckpts, names in Ranges(instance, [(c, "", n) for c, n in sorted(stale.items())]).runs():
            keys = [ratings_key(r) for r in names] + _across(batch, names)
            reread = _other(batch, ckpts, keys, "ratings")
            for c in ckpts:
                followed(reread.of(c, [r for r in names if r in stale[c]]))
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
                starting(c)
            outcome = run(batch, ckpts, models[ckpts[0]] if len(ckpts) == 1 else "", names, evaluation(names))
            for c in ckpts:
                outcomes[c] = outcome.of(c, names)
            interrupt.flag |= outcome.interrupted
        if automation is None and not interrupt.check():
            wait_until_settled(instance, list(outcomes.values()), since, QUIET_S, SETTLE_TIMEOUT_S)
        elif automation is not None:
            _settle(batch, automation, outcomes, interrupt, starting, followed)
        for outcome in outcomes.values():
            outcome.interrupted |= interrupt.flag and not outcome.success
            (on_outcome or (lambda _o: None))(outcome)
        if interrupt.check() and on_interrupted is not None:
            on_interrupted()
    ran = [o for o in outcomes.values() if o.run_id]
    if ran and not interrupt.flag:  # the report, drawn once the graph has settled
        ran[-1].report, error = redraw_report(wh, (defs.resources or {})["publish"].report_dir)
        ran[-1].report_error = (failure_hint(error) or error) if error else None
        if error:
            print(f"report not written: {ran[-1].report_error}", file=sys.stderr, flush=True)
    return list(outcomes.values())
