"""The Dagster code location: one asset group per rubric config, the checkpoint sensor, resources."""

from __future__ import annotations

import os
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
        executor=executor_from_env(),
    )


def executor_from_env() -> dg.ExecutorDefinition:
    """In-process by default: on 2 cores it beats multiprocess, whose steps each pay ~2 s of process
    start-up (bench/bench_demo.py). EVAL_EXECUTOR=multiprocess (EVAL_MAX_CONCURRENT steps at once) for
    machines with cores to spare; warehouse steps then take turns through the `duckdb_warehouse` pool."""
    kind = os.environ.get("EVAL_EXECUTOR", "in_process").strip().lower()
    if kind == "in_process":
        return dg.in_process_executor
    if kind == "multiprocess":
        limit = int(os.environ.get("EVAL_MAX_CONCURRENT", "0"))
        return dg.multiprocess_executor.configured({"max_concurrent": limit}) if limit > 0 else dg.multiprocess_executor
    raise ValueError(f"EVAL_EXECUTOR must be 'in_process' or 'multiprocess', got {kind!r}")


defs = build_definitions()
