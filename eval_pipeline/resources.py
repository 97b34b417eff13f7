"""Dagster resources: the DuckDB warehouse and the checkpoint source folder."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from eval_pipeline.checkpoints import Checkpoint, CheckpointError, checkpoint_folder, default_checkpoint_dir, read_checkpoint
from eval_pipeline.warehouse import Warehouse, default_warehouse_path


class WarehouseResource(dg.ConfigurableResource):
    """The DuckDB file every asset writes to (EVAL_WAREHOUSE, default data/warehouse.duckdb)."""

    path: str = Field(default_factory=default_warehouse_path)

    def get(self) -> Warehouse:
        return Warehouse(self.path)


class CheckpointSource(dg.ConfigurableResource):
    """Where checkpoint folders land (EVAL_CHECKPOINT_DIR, default data/checkpoints)."""

    root: str = Field(default_factory=lambda: str(default_checkpoint_dir()))

    def load(self, checkpoint_id: str) -> Checkpoint:
        folder = checkpoint_folder(checkpoint_id, Path(self.root))
        if not folder.is_dir():
            raise CheckpointError(f"checkpoint {checkpoint_id!r}: no folder {folder}")
        return read_checkpoint(folder)


class JudgeResource(dg.ConfigurableResource):
    """Which judge scores samples: 'heuristic' (offline, rule-based, the default) or 'openai'.

    The endpoint and key come from OPENAI_BASE_URL / OPENAI_API_KEY in the environment
    and are never stored in run config, metadata or the warehouse.
    """

    mode: str = Field(default_factory=lambda: os.environ.get("EVAL_JUDGE", "heuristic"))
    concurrency: int = Field(default_factory=lambda: int(os.environ.get("EVAL_JUDGE_CONCURRENCY", "16")))
    timeout_s: float = Field(default_factory=lambda: float(os.environ.get("EVAL_JUDGE_TIMEOUT", "60")))
    max_retries: int = Field(default_factory=lambda: int(os.environ.get("EVAL_JUDGE_MAX_RETRIES", "4")))

    def overrides(self) -> dict:
        return {"concurrency": self.concurrency, "timeout_s": self.timeout_s, "max_retries": self.max_retries}
