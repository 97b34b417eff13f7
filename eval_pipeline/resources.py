"""Dagster resources: the DuckDB warehouse and the checkpoint source folder."""

from __future__ import annotations

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
