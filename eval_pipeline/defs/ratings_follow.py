"""Trust follows the ratings: when rating files change, the checkpoints already evaluated are decided again from
them, without asking the judge.

A rubric's ``human_ratings`` partition records the version of the ratings folder it was read from
(``<rubric>.human_ratings_sources``). A checkpoint whose recorded version is not the folder's now is *stale*. The
judge's verdict pools every rated sample of every checkpoint it judged, so a change of ratings moves the verdict of
all of them: first every stale ``human_ratings`` partition is read again, then each evaluated checkpoint's
rating-dependent assets (``REDECIDED``: agreement and the judge's trust, calibrated means and changes, length bias,
gates, the verdict, worklists) are materialized again. None of them calls the judge: the judge's scores are read
from the warehouse as they are.

Two callers: ``eval-pipeline run`` / ``backfill`` (runner.materialize_checkpoints, around the command's own
checkpoints) and the ``ratings_sensor`` (the UI, the annotate app's saves), each visible as its own runs.
"""

from __future__ import annotations

import dagster as dg

from eval_pipeline.core.contracts import Table
from eval_pipeline.defs.resources import RatingsSource
from eval_pipeline.ingest.ratings import evaluated, stale
from eval_pipeline.storage.warehouse import Warehouse

# the assets that read people's ratings (directly or through one that does) and never the judge, in flow order
REDECIDED = ("agreement", "comparison", "length_bias", "gates", "verdict", "worklists")


def ratings_keys(rubric: str, present: set[dg.AssetKey]) -> list[dg.AssetKey]:
    return [k for k in [dg.AssetKey([rubric, Table.HUMAN_RATINGS])] if k in present]


def redecided_keys(rubric: str, present: set[dg.AssetKey]) -> list[dg.AssetKey]:
    return [k for k in (dg.AssetKey([rubric, name]) for name in REDECIDED) if k in present]


PURPOSE = {"ratings": "ratings changed", "redecide": "decide again"}


def _requests(step: str, rubric: str, ckpts: list[str], keys: list[dg.AssetKey], version: str) -> list[dg.RunRequest]:
    """One run per checkpoint, keyed by the folder version (a version is never asked for twice)."""
    return [
        dg.RunRequest(
            run_key=f"{step}:{rubric}:{c}:{version}",
            partition_key=c,
            asset_selection=keys,
            tags={"eval/checkpoint": c, "eval/rubrics": rubric, "eval/purpose": PURPOSE[step]},
        )
        for c in ckpts
    ]


def build_ratings_sensor(
    rubrics: list[str],
    present: set[dg.AssetKey],
    ratings: RatingsSource,
    warehouse: str,
    minimum_interval_seconds: int = 10,
) -> dg.SensorDefinition:
    """Watches each rubric's ratings folder; when it changes, reads the stale ``human_ratings`` partitions again
    (one run each), then, once none is stale, decides every evaluated checkpoint again (one run each): never a
    judge call. The cursor holds, per rubric, the folder version whose second step is still owed."""
    import json

    selection = [k for r in rubrics for k in [*ratings_keys(r, present), *redecided_keys(r, present)]]

    @dg.sensor(
        name="ratings_sensor",
        description="When rating files change (a person rating in `eval-pipeline annotate`, a CSV dropped in the "
        "folder), reads them again for every evaluated checkpoint and decides agreement, the judge's trust, gates "
        "and verdicts again, with no judge call.",
        asset_selection=selection,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def ratings_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        from eval_pipeline.defs.partitions import CHECKPOINTS_PARTITION

        busy = context.instance.get_runs(
            filters=dg.RunsFilter(
                statuses=[
                    dg.DagsterRunStatus.QUEUED,
                    dg.DagsterRunStatus.NOT_STARTED,
                    dg.DagsterRunStatus.STARTING,
                    dg.DagsterRunStatus.STARTED,
                ]
            ),
            limit=1,
        )
        if busy:  # a run reads the files as they are when it gets there; the rest is followed once runs end
            return dg.SkipReason(f"run {busy[0].run_id} in flight: rating files are followed once runs end")
        owed: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        wh = Warehouse(warehouse, read_only=True, lock_timeout_s=3)
        registered = set(context.instance.get_dynamic_partitions(CHECKPOINTS_PARTITION))
        requests = []
        try:
            for rubric in rubrics:
                ckpts = [c for c in evaluated(wh, rubric) if c in registered]
                now, old = stale(wh, rubric, ratings.folder(rubric), ckpts)
                if old:  # first step: read the files again
                    owed[rubric] = now
                    requests += _requests("ratings", rubric, old, ratings_keys(rubric, present), now)
                elif owed.get(rubric) == now:  # second step, once every partition has read this version
                    requests += _requests("redecide", rubric, ckpts, redecided_keys(rubric, present), now)
                    owed.pop(rubric)
        finally:
            wh.close()
        if not requests:
            return dg.SkipReason("no rating file changed")
        return dg.SensorResult(run_requests=requests, cursor=json.dumps(owed, sort_keys=True))

    return ratings_sensor
