"""What the definitions ask of the instance's runs (the sensors, the automation, the step scope): which
checkpoints a run evaluates, which runs are in flight. Questions only; launching and following runs is the runtime's
(runtime.runs)."""

from __future__ import annotations

from collections.abc import Callable, Collection

import dagster as dg

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def tagged(run: dg.DagsterRun) -> list[str]:
    """The checkpoints the command tagged a run with: alone (``eval/checkpoint``) or a range (``eval/checkpoints``)."""
    one, held = run.tags.get("eval/checkpoint"), run.tags.get("eval/checkpoints", "")
    return ([one] if one else []) + (held.split(",") if held else [])


def holds(run: dg.DagsterRun, checkpoint_id: str) -> bool:
    """Whether ``run`` evaluates this checkpoint: alone (``eval/checkpoint``) or in a range (``eval/checkpoints``)."""
    return checkpoint_id in tagged(run)


def checkpoints_held(run: dg.DagsterRun, registered: list[str]) -> list[str]:
    """The checkpoints a run evaluates, whoever launched it: the command's tags (``eval/checkpoint``,
    ``eval/checkpoints``), a partition (``dagster/partition``), or a range of them (a UI backfill's or the backfill
    policy's, expanded over ``registered``, the checkpoints in their registered order)."""
    if held := tagged(run):
        return held
    if run.tags.get("dagster/partition"):
        return [run.tags["dagster/partition"]]
    start, end = run.tags.get(RANGE_START), run.tags.get(RANGE_END)
    if start in registered and end in registered:
        return registered[registered.index(start) : registered.index(end) + 1]
    return []


def reading_in_flight(
    instance: dg.DagsterInstance, keys: Collection[dg.AssetKey], registered: list[str]
) -> set[tuple[dg.AssetKey, str]]:
    """The (asset, checkpoint) pairs that a run queued or in flight will materialize, of these ``keys``: what such a
    run reads when its step starts needs no run of its own (a sensor that asked for one would launch a run per
    checkpoint of a backfill still on its way)."""
    out: set[tuple[dg.AssetKey, str]] = set()
    wanted = set(keys)
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=IN_FLIGHT), limit=500):
        run = record.dagster_run
        selected = wanted if run.asset_selection is None else wanted & set(run.asset_selection)
        for ckpt in checkpoints_held(run, registered) if selected else []:
            out.update((key, ckpt) for key in selected)
    return out


def runs_of_checkpoint(
    instance: dg.DagsterInstance, checkpoint_id: str, statuses: list[dg.DagsterRunStatus] | None = None, limit: int = 5
) -> list[dg.DagsterRun]:
    """The newest runs tagged with this checkpoint (of these statuses, when given); with statuses, also the runs of
    a range of checkpoints holding it (``eval/checkpoints``: in-flight runs are few, so they are all read)."""
    tags = {"eval/checkpoint": checkpoint_id}
    records = instance.get_run_records(filters=dg.RunsFilter(tags=tags, statuses=statuses), limit=limit)
    found = [r.dagster_run for r in records]
    if statuses:
        for r in instance.get_run_records(filters=dg.RunsFilter(statuses=statuses), limit=200):
            if holds(r.dagster_run, checkpoint_id) and r.dagster_run not in found:
                found.append(r.dagster_run)
    return found[:limit]


IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def concerns_checkpoint(checkpoint_id: str) -> Callable[[dg.DagsterRun], bool]:
    """Whether a run can change what is decided of this checkpoint: a run of it (alone or in a range), or a run
    of no checkpoint (the decisions across checkpoints, the pools, a re-read of ratings)."""

    def concerns(run: dg.DagsterRun) -> bool:
        if "eval/checkpoint" not in run.tags and "eval/checkpoints" not in run.tags:
            return run.tags.get("dagster/partition") in (None, checkpoint_id)
        return holds(run, checkpoint_id)

    return concerns
