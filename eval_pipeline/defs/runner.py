"""Materialize checkpoints in-process: register the partitions, then one run per checkpoint.

Used by ``make demo``, the CLI and the tests. A run covers exactly the rubric
groups the checkpoint has a file for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from eval_pipeline.defs.partitions import CHECKPOINTS_PARTITION
from eval_pipeline.ingest.checkpoints import read_checkpoint


@dataclass
class RunOutcome:
    checkpoint_id: str
    rubrics: list[str]
    success: bool
    seconds: float
    run_id: str


def register_checkpoints(instance: dg.DagsterInstance, checkpoint_ids: list[str]) -> list[str]:
    existing = set(instance.get_dynamic_partitions(CHECKPOINTS_PARTITION))
    new = [c for c in checkpoint_ids if c not in existing]
    if new:
        instance.add_dynamic_partitions(CHECKPOINTS_PARTITION, new)
    return new


def materialize_checkpoints(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    checkpoint_ids: list[str],
    rubrics: set[str] | None = None,
    raise_on_error: bool = False,
) -> list[RunOutcome]:
    root = Path((defs.resources or {})["checkpoints"].root)
    register_checkpoints(instance, checkpoint_ids)
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    groups = {k.path[0] for a in assets for k in a.keys}
    outcomes = []
    for ckpt_id in checkpoint_ids:
        ckpt = read_checkpoint(root / ckpt_id)
        names = sorted(set(ckpt.rubric_files) & groups & (rubrics or groups))
        if not names:
            continue
        t0 = time.perf_counter()
        result = dg.materialize(
            [*assets, *(defs.asset_checks or [])],
            instance=instance,
            partition_key=ckpt_id,
            resources=defs.resources,
            selection=dg.AssetSelection.groups(*names),
            tags={"eval/checkpoint": ckpt_id, "eval/model": ckpt.model, "eval/rubrics": ",".join(names)},
            raise_on_error=raise_on_error,
        )
        outcomes.append(RunOutcome(ckpt_id, names, result.success, time.perf_counter() - t0, result.run_id))
    return outcomes
