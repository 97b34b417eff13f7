"""The Dagster code location: one asset group per rubric config, the checkpoint sensor, resources."""

from __future__ import annotations

import warnings
from pathlib import Path

import dagster as dg

# partitioned asset checks are a preview feature in Dagster 1.13; we rely on them knowingly
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

from eval_pipeline.config import RubricConfig, load_rubrics
from eval_pipeline.factory import build_rubric_assets
from eval_pipeline.resources import CheckpointSource, JudgeResource, WarehouseResource
from eval_pipeline.sensors import build_checkpoint_sensor


def build_definitions(
    rubric_dir: str | Path | None = None,
    warehouse_path: str | None = None,
    checkpoint_root: str | None = None,
) -> dg.Definitions:
    rubrics: list[RubricConfig] = load_rubrics(rubric_dir)
    assets: list = []
    checks: list = []
    keys_by_rubric: dict[str, list[dg.AssetKey]] = {}
    for rubric in rubrics:
        defs = build_rubric_assets(rubric)
        group_assets = [d for d in defs if isinstance(d, dg.AssetsDefinition) and not isinstance(d, dg.AssetChecksDefinition)]
        assets.extend(group_assets)
        checks.extend(d for d in defs if isinstance(d, dg.AssetChecksDefinition))
        keys_by_rubric[rubric.name] = [k for a in group_assets for k in a.keys]
    resources = {
        "warehouse": WarehouseResource(path=warehouse_path) if warehouse_path else WarehouseResource(),
        "checkpoints": CheckpointSource(root=checkpoint_root) if checkpoint_root else CheckpointSource(),
        "judge": JudgeResource(),
    }
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        sensors=[build_checkpoint_sensor(rubrics, keys_by_rubric, checkpoint_root)],
        resources=resources,
        # On 2 cores the in-process executor beats multiprocess (about 2 s start-up per step).
        executor=dg.in_process_executor,
    )


defs = build_definitions()
