"""The Dagster definitions: one asset group per rubric config, merged, with the checkpoint sensor, the resources
and the executor. They are not built at import (``definitions`` is the code location that does): the CLI, the
demo and the tests build their own, and one more build at import would cost each of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.core import settings
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.ids import IDENTIFIER_RE
from eval_pipeline.defs.asset import ON_DEMAND_TAG
from eval_pipeline.defs.automation import redecide_sensor
from eval_pipeline.defs.batch_sensor import build_batch_sensor, downstream_of
from eval_pipeline.defs.factory import rubric_definitions
from eval_pipeline.defs.import_sensor import build_import_sensor
from eval_pipeline.defs.ratings_sensor import build_ratings_sensor
from eval_pipeline.defs.resources import RatingsSource, default_resources
from eval_pipeline.defs.sensors import build_checkpoint_sensor, build_report_sensors
from eval_pipeline.rubrics import load_rubrics, load_rubrics_leniently


def build_definitions(
    rubric_dir: str | Path | None = None,
    warehouse_path: str | None = None,
    checkpoint_root: str | None = None,
    lenient: bool = False,
) -> dg.Definitions:
    """Every rubric's group, the sensors, resources and executor. ``lenient`` (the code location): a rubric file
    that does not load becomes one asset in its group that shows the problems and fails when materialized, and
    the other groups load as usual; otherwise (the CLI, the demo, tests) a broken file fails the build."""
    broken: dict[str, str] = {}
    if lenient:
        rubrics, broken = load_rubrics_leniently(rubric_dir)
    else:
        rubrics = load_rubrics(rubric_dir)
    groups = {rubric.name: rubric_definitions(rubric) for rubric in rubrics}
    groups.update({name: _broken_rubric(name, problems) for name, problems in broken.items() if name not in groups})
    keys_by_rubric = {  # what a checkpoint's evaluation materializes: no on-demand asset (an alignment)
        name: [
            k
            for a in d.assets or []
            if isinstance(a, dg.AssetsDefinition)
            for k in a.keys
            if ON_DEMAND_TAG not in a.tags_by_key.get(k, {})
        ]
        for name, d in groups.items()
    }
    resources = default_resources(warehouse_path, checkpoint_root)
    follow = build_ratings_sensor([r.name for r in rubrics], RatingsSource(), warehouse_path)
    judge_steps = (Table.JUDGE_SCORES, Table.EXTRACTIONS, Table.JUDGE_CALIBRATION, Table.JUDGE_REPEATABILITY)
    batch_steps = {
        r.name: {
            step: downstream_of(
                list(groups[r.name].assets or []), [dg.AssetKey([r.name, step])], keys_by_rubric[r.name]
            )
            for step in judge_steps
            if dg.AssetKey([r.name, step]) in keys_by_rubric[r.name]
        }
        for r in rubrics
    }
    batches = build_batch_sensor(
        batch_steps,
        warehouse_path,
        minimum_interval_seconds=_batch_poll_s(),
    )
    shared = dg.Definitions(
        sensors=[
            build_checkpoint_sensor(rubrics, keys_by_rubric, checkpoint_root),
            build_import_sensor(
                None, None if checkpoint_root is None or "://" in str(checkpoint_root) else checkpoint_root
            ),
            follow,
            batches,
            redecide_sensor(),
            *build_report_sensors(resources),
        ],
        resources=resources,
        executor=executor_from_env(),
    )
    return dg.Definitions.merge(*groups.values(), shared)


def _batch_poll_s() -> float:
    """EVAL_JUDGE_BATCH_POLL (a wrong value: the default here; the judge steps refuse it in one line)."""
    try:
        return settings.judge_config().batch_poll_s
    except (ValueError, settings.SettingError):
        return 60.0


def _broken_rubric(name: str, problems: str) -> dg.Definitions:
    """A rubric file that does not load, as its group shows it in the UI: one asset, whose description is the
    problems, and which fails with them when materialized."""
    group = name if IDENTIFIER_RE.fullmatch(name) else "broken_rubric_configs"
    key = dg.AssetKey([group, "rubric_config_error"]) if group == name else dg.AssetKey([group, name])

    @dg.asset(key=key, group_name=group, description=f"This rubric file does not load:\n\n{problems}")
    def rubric_config_error() -> None:
        raise dg.Failure(description=problems)

    return dg.Definitions(assets=[rubric_config_error])


def executor_from_env() -> dg.ExecutorDefinition:
    """In-process by default: on 2 cores it beats multiprocess (bench/bench_demo.py). EVAL_EXECUTOR=multiprocess
    (EVAL_MAX_CONCURRENT steps at once) for machines with cores to spare (on a DuckLake; a DuckDB file serves one
    process at a time)."""
    kind = settings.executor_kind()
    if kind == "in_process":
        return dg.in_process_executor
    if kind == "multiprocess":
        # steps start from a forkserver that has imported the code location once, instead of a spawned process
        # importing Dagster, pandas and the rubric groups again for every step
        config: dict[str, Any] = {
            "start_method": {"forkserver": {"preload_modules": ["eval_pipeline.defs.definitions"]}}
        }
        limit = settings.max_concurrent_steps()
        if limit > 0:
            config["max_concurrent"] = limit
        return dg.multiprocess_executor.configured(config)
    raise ValueError(f"EVAL_EXECUTOR must be 'in_process' or 'multiprocess', got {kind!r}")
