"""Dagster resources: where every asset reads and writes. Defaults come from eval_pipeline.core.settings
(the environment, read there once); a run's resource config overrides them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr

from eval_pipeline.core import settings
from eval_pipeline.ingest.checkpoints import Checkpoint, CheckpointError, checkpoint_folder, read_checkpoint
from eval_pipeline.storage.warehouse import Warehouse


class WarehouseResource(dg.ConfigurableResource[Any]):
    """The warehouse every asset writes to (EVAL_WAREHOUSE; default the DuckLake ``data/lake/catalog.sqlite``).
    For the run (or, under the multiprocess executor, the step) it serves, one ``Warehouse`` and its backend:
    what the backend keeps open (a lake's attachment, a file's connection) lives as long as the run."""

    path: str = Field(default_factory=settings.warehouse_path)
    _warehouse: Warehouse | None = PrivateAttr(default=None)

    def get(self) -> Warehouse:
        if self._warehouse is None:
            spec = self.path
            if isinstance(spec, dg.EnvVar):  # used outside a run (the CLI, the demo): read the variable now
                spec = spec.get_value() or settings.warehouse_path()
            self._warehouse = Warehouse(spec)
        return self._warehouse

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[WarehouseResource]:
        wh = self.get()
        try:
            with wh.lingering():
                yield self
        finally:
            wh.close()
            self._warehouse = None


class CheckpointSource(dg.ConfigurableResource[Any]):
    """Where checkpoint folders land (EVAL_CHECKPOINT_DIR, default data/checkpoints)."""

    root: str = Field(default_factory=lambda: str(settings.checkpoint_dir()))

    def load(self, checkpoint_id: str) -> Checkpoint:
        folder = checkpoint_folder(checkpoint_id, Path(self.root))
        if not folder.is_dir():
            raise CheckpointError(f"checkpoint {checkpoint_id!r}: no folder {folder}")
        return read_checkpoint(folder)


class RatingsSource(dg.ConfigurableResource[Any]):
    """Human rating CSVs, one folder per rubric (EVAL_RATINGS_DIR, default data/human_ratings)."""

    root: str = Field(default_factory=lambda: str(settings.ratings_dir()))


class PublishTargets(dg.ConfigurableResource[Any]):
    """Where files for people are written: worklists (EVAL_WORKLIST_DIR) and the report (EVAL_REPORT_DIR)."""

    worklist_dir: str = Field(default_factory=lambda: str(settings.worklist_dir()))
    report_dir: str = Field(default_factory=lambda: str(settings.report_dir()))


class JudgeResource(dg.ConfigurableResource[Any]):
    """Which judge scores samples: a judge backend (judge.backends): 'heuristic' (offline, rule-based, the default) or
    'openai'.

    The endpoint and key come from OPENAI_BASE_URL / OPENAI_API_KEY in the environment
    and are never stored in run config, metadata or the warehouse.
    """

    mode: str = Field(default_factory=lambda: settings.judge_env().mode)
    concurrency: int = Field(default_factory=lambda: settings.judge_env().concurrency)
    timeout_s: float = Field(default_factory=lambda: settings.judge_env().timeout_s)
    max_retries: int = Field(default_factory=lambda: settings.judge_env().max_retries)

    def overrides(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "timeout_s": self.timeout_s, "max_retries": self.max_retries}


def warehouse_resource(warehouse_path: str | None = None) -> WarehouseResource:
    """Given a path, that warehouse; otherwise EVAL_WAREHOUSE read by Dagster when the run starts (``EnvVar``),
    or the embedded default when it is unset."""
    if warehouse_path:
        return WarehouseResource(path=warehouse_path)
    if os.environ.get("EVAL_WAREHOUSE", "").strip():
        return WarehouseResource(path=dg.EnvVar("EVAL_WAREHOUSE"))
    return WarehouseResource()


def default_resources(
    warehouse_path: str | None = None, checkpoint_root: str | None = None
) -> dict[str, dg.ConfigurableResource[Any]]:
    return {
        "warehouse": warehouse_resource(warehouse_path),
        "checkpoints": CheckpointSource(root=checkpoint_root) if checkpoint_root else CheckpointSource(),
        "ratings": RatingsSource(),
        "publish": PublishTargets(),
        "judge": JudgeResource(),
    }
