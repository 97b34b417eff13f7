"""The ratings sensor: when rating files change, the ``human_ratings`` partitions read from an older version of the
folder are read again, and nothing else.

A rubric's ``human_ratings`` partition records the version of the ratings folder it was read from
(``<rubric>.human_ratings_sources``); a checkpoint whose recorded version is not the folder's now is *stale*. What
the new ratings move (the calibration pool, so every checkpoint's agreement, the judge's trust, calibrated means,
comparison, gates and verdict) is the graph's to say: those assets carry the automation condition of
defs/automation.py and Dagster brings them up to date, with no judge call. ``eval-pipeline run`` asks the same
question at its start (``stale_ratings``) and reads those partitions again first.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg

from eval_pipeline.core import settings
from eval_pipeline.core.contracts import Table
from eval_pipeline.defs.automation import runs_mark
from eval_pipeline.defs.inflight import reading_in_flight
from eval_pipeline.defs.resources import RatingsSource
from eval_pipeline.ingest.ratings import evaluated, folder_fingerprint, stale
from eval_pipeline.storage.warehouse import Warehouse


def stale_ratings(
    wh: Warehouse, rubrics: list[str], root: Path, registered: set[str]
) -> dict[str, tuple[str, list[str]]]:
    """Per rubric with a stale partition: (the folder's version now, the evaluated checkpoints, registered as
    partitions, whose ``human_ratings`` were read from another). ``root``: every rubric's ratings on this machine
    (``RatingsSource.folder()``: an ``s3://`` folder mirrored once)."""
    found = {}
    for rubric in rubrics:
        ckpts = [c for c in evaluated(wh, rubric) if c in registered]
        now, old = stale(wh, rubric, root, ckpts, registered)
        if old:
            found[rubric] = (now, old)
    return found


def by_checkpoint(found: dict[str, tuple[str, list[str]]]) -> dict[str, list[str]]:
    """``stale_ratings``' answer turned round: per checkpoint, the rubrics whose ratings of it are stale."""
    out: dict[str, list[str]] = {}
    for rubric, (_, old) in sorted(found.items()):
        for ckpt in old:
            out.setdefault(ckpt, []).append(rubric)
    return out


def ratings_key(rubric: str) -> dg.AssetKey:
    return dg.AssetKey([rubric, Table.HUMAN_RATINGS])


def build_ratings_sensor(
    rubrics: list[str], ratings: RatingsSource, warehouse: str | None, minimum_interval_seconds: int = 10
) -> dg.SensorDefinition:
    """Watches each rubric's ratings folder; requests one run per checkpoint whose ``human_ratings`` were read from
    another version of it (keyed by the version: a version is never asked for twice), unless a run queued or in
    flight will read them (``runs.reading_in_flight``). Its cursor is what the
    answer was read from (the files' versions, the registered checkpoints, the run that changed last: what a run
    writes is the rest): while they are unchanged it skips without opening the warehouse."""

    @dg.sensor(
        name="ratings_sensor",
        description="When rating files change (a person rating in `eval-pipeline annotate`, a CSV dropped in the "
        "folder), reads them again for every evaluated checkpoint; the automation sensor then decides agreement, the "
        "judge's trust, gates and verdicts again from the calibration pool, with no judge call.",
        asset_selection=[ratings_key(r) for r in rubrics],
        minimum_interval_seconds=settings.sensor_interval_seconds(minimum_interval_seconds),
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def ratings_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        from eval_pipeline.defs.partitions import CHECKPOINTS_PARTITION

        order = list(context.instance.get_dynamic_partitions(CHECKPOINTS_PARTITION))
        registered = set(order)
        # what the answer is read from: the rating files, the checkpoints registered and what runs wrote (which
        # checkpoints were evaluated, from which ratings): unchanged since the last look, nothing is stale anew
        root = ratings.folder()  # an s3:// folder mirrored once a look, every rubric's files at once
        mark = json.dumps(
            {
                "files": {r: folder_fingerprint(r, root) for r in rubrics},
                "registered": hashlib.sha256("\n".join(sorted(registered)).encode()).hexdigest()[:16],
                "runs": runs_mark(context.instance),
            },
            sort_keys=True,
        )
        if context.cursor == mark:
            return dg.SkipReason("no rating file changed and no run ended since the last look")
        wh = Warehouse(warehouse, read_only=True, lock_timeout_s=3)
        try:
            found = stale_ratings(wh, rubrics, root, registered)
        finally:
            wh.close()
        # a checkpoint whose ratings a run in flight will read (a backfill's range on its way, a landing) is that
        # run's: once it ends, the cursor's run mark moves and this sensor looks again
        coming = reading_in_flight(context.instance, [ratings_key(r) for r in found], order)
        found = {
            r: (now, kept)
            for r, (now, old) in found.items()
            if (kept := [c for c in old if (ratings_key(r), c) not in coming])
        }
        requests = [
            dg.RunRequest(
                run_key=f"ratings:{ckpt}:" + ",".join(f"{r}@{found[r][0]}" for r in names),
                partition_key=ckpt,
                asset_selection=[ratings_key(r) for r in names],
                tags={"eval/checkpoint": ckpt, "eval/rubrics": ",".join(names), "eval/purpose": "ratings changed"},
            )
            for ckpt, names in sorted(by_checkpoint(found).items())
        ]
        if not requests:
            context.update_cursor(mark)
            return dg.SkipReason("no rating file changed")
        return dg.SensorResult(run_requests=requests, cursor=mark)

    return ratings_sensor
