"""The checkpoint sensor: a complete folder under data/checkpoints/ becomes a partition and a run.

A folder is complete once ``checkpoint.json`` exists (it is written last). Each
new complete checkpoint is registered as a dynamic partition, and one run is
requested for it covering exactly the rubric groups that have a file in the
folder. Folders seen before, half-written folders and refused folders (unsafe
id, bad manifest) request nothing; refusals are logged with their reason.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.core import settings
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.defs.inflight import runs_of_checkpoint
from eval_pipeline.defs.partitions import CHECKPOINTS, CHECKPOINTS_PARTITION
from eval_pipeline.defs.resources import CheckpointSource
from eval_pipeline.publish.report import redraw_report


def evaluated_elsewhere(instance: dg.DagsterInstance, checkpoint_id: str) -> str | None:
    """The id of a run of this checkpoint that exists already (queued, in flight or done), or None."""
    runs = runs_of_checkpoint(instance, checkpoint_id, limit=1)
    return runs[0].run_id if runs else None


def build_checkpoint_sensor(
    rubrics: list[RubricConfig],
    assets_for_rubric: dict[str, list[dg.AssetKey]],
    root: str | Path | None = None,
    minimum_interval_seconds: int = 15,
) -> dg.SensorDefinition:
    known_rubrics = {r.name for r in rubrics}
    selection = dg.AssetSelection.assets(*[k for keys in assets_for_rubric.values() for k in keys])

    @dg.sensor(
        name="checkpoint_sensor",
        description="Registers each complete checkpoint folder as a partition and evaluates it on every rubric it "
        "has a file for.",
        asset_selection=selection,
        minimum_interval_seconds=settings.sensor_interval_seconds(minimum_interval_seconds),
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def checkpoint_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        scan = (CheckpointSource(root=str(root)) if root else CheckpointSource()).scan()  # s3://: mirrored first
        for reason in scan.refused:
            context.log.warning(f"checkpoint refused: {reason}")
        existing = set(context.instance.get_dynamic_partitions(CHECKPOINTS_PARTITION))
        new = [c for c in scan.complete if c.checkpoint_id not in existing]
        run_requests = []
        registered = []
        for ckpt in new:
            elsewhere = evaluated_elsewhere(context.instance, ckpt.checkpoint_id)
            if elsewhere:  # the CLI (or a person in the UI) got to it first: registered, not run twice
                context.log.info(f"checkpoint {ckpt.checkpoint_id}: already evaluated by run {elsewhere}")
                registered.append(ckpt.checkpoint_id)
                continue
            rubric_names = sorted(set(ckpt.rubric_files) & known_rubrics)
            unknown = sorted(set(ckpt.rubric_files) - known_rubrics)
            if unknown:
                context.log.warning(
                    f"checkpoint {ckpt.checkpoint_id}: no rubric config for {unknown}; those files are ignored"
                )
            if not rubric_names:
                context.log.warning(f"checkpoint {ckpt.checkpoint_id}: no file for any known rubric; not registered")
                continue
            registered.append(ckpt.checkpoint_id)
            run_requests.append(
                dg.RunRequest(
                    run_key=f"checkpoint:{ckpt.checkpoint_id}",
                    partition_key=ckpt.checkpoint_id,
                    asset_selection=[k for name in rubric_names for k in assets_for_rubric[name]],
                    asset_check_keys=[],  # the gates step reports each checkpoint's checks (defs/checks.py)
                    tags={
                        "eval/checkpoint": ckpt.checkpoint_id,
                        "eval/model": ckpt.model,
                        "eval/rubrics": ",".join(rubric_names),
                    },
                )
            )
        if not run_requests:
            if registered:
                return dg.SensorResult(dynamic_partitions_requests=[CHECKPOINTS.build_add_request(registered)])
            detail = (
                f"{len(scan.complete)} complete, {len(scan.incomplete)} still being written, "
                f"{len(scan.refused)} refused"
            )
            return dg.SkipReason(f"no new checkpoint ({detail})")
        return dg.SensorResult(
            run_requests=run_requests,
            dynamic_partitions_requests=[CHECKPOINTS.build_add_request(registered)],
        )

    return checkpoint_sensor


def redraw(resources: Mapping[str, Any]) -> tuple[Path | None, str | None]:
    """The report drawn again from the definitions' warehouse into their publish folder, once a run has ended: the
    one place it is drawn, whoever ran the run (runtime.runner for in-process runs, the run-status sensors below
    for the daemon's). (Its path, None) or (None, the reason in one line): a report is never a run's failure."""
    return redraw_report(resources["warehouse"].get(), resources["publish"].report_dir)


def build_report_sensors(resources: dict[str, Any]) -> list[dg.SensorDefinition]:
    """The report redrawn once after each run the daemon saw end (launched from the UI, a backfill or the
    checkpoint sensor), whether it succeeded or failed: it covers every rubric and checkpoint, so it is drawn
    once a run, never in a step. In-process runs (CLI, demo) have the runner redraw it (``redraw`` both)."""

    def redrawn(context: dg.RunStatusSensorContext) -> dg.SkipReason | None:
        path, error = redraw(resources)
        if error:
            context.log.warning(f"report not written: {error}")
            return dg.SkipReason(f"report not written: {error}")
        context.log.info(f"report redrawn: {path}")
        return None

    sensors: list[dg.SensorDefinition] = []
    for status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE):

        @dg.run_status_sensor(
            name=f"report_after_{status.value.lower()}",
            run_status=status,
            description="Redraws the static HTML report (EVAL_REPORT_DIR) after a run ends.",
            default_status=dg.DefaultSensorStatus.RUNNING,
            minimum_interval_seconds=settings.sensor_interval_seconds(15),
        )
        def report_sensor(context: dg.RunStatusSensorContext) -> dg.SkipReason | None:
            return redrawn(context)

        sensors.append(report_sensor)
    return sensors
