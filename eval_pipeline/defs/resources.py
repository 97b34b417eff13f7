"""Dagster resources: where every asset reads and writes. Defaults come from eval_pipeline.core.settings
(the environment, read there once); a run's resource config overrides them."""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
import pandas as pd
from pydantic import Field, PrivateAttr

from eval_pipeline.core import settings
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import Record
from eval_pipeline.ingest.checkpoints import (
    Checkpoint,
    CheckpointError,
    Scan,
    checkpoint_folder,
    read_checkpoint,
    scan_checkpoints,
)
from eval_pipeline.judge.backends import JudgedAt, identity_of
from eval_pipeline.judge.cached import JudgeRunStats
from eval_pipeline.judge.extraction import extract
from eval_pipeline.judge.identity import JudgeIdentity
from eval_pipeline.judge.runner import judge_samples
from eval_pipeline.storage import objects
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
                spec = spec.get_value() or ""
            self._warehouse = Warehouse(spec or None)  # none given: EVAL_WAREHOUSE's, else the default lake
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


def _local(where: str, sub: str | None = None) -> Path:
    """The folder ``where`` (or its ``sub`` folder) on this machine; an ``s3://`` one mirrored first, so what is
    read is the store as it is now."""
    local = settings.local_folder(where)
    if objects.is_remote(where):
        objects.mirror(objects.join(where, sub) if sub else where, local / sub if sub else local)
    return local


class CheckpointSource(dg.ConfigurableResource[Any]):
    """Where checkpoint folders land (EVAL_CHECKPOINT_DIR, default data/checkpoints; an ``s3://`` folder on
    several machines)."""

    root: str = Field(default_factory=settings.checkpoint_location)

    def folder(self, checkpoint_id: str | None = None) -> Path:
        """The local folder of every checkpoint (an ``s3://`` root mirrored: only ``checkpoint_id``'s when given)."""
        return _local(self.root, checkpoint_id)

    def location(self, checkpoint_id: str) -> str:
        """Where the checkpoint's folder is, as a person names it (its ``s3://`` URL, or the local folder)."""
        if objects.is_remote(self.root):
            return objects.join(self.root, checkpoint_id)
        return str(checkpoint_folder(checkpoint_id, Path(self.root)))

    def names(self) -> set[str]:
        """Every checkpoint folder's name under the root, complete or not (an ``s3://`` root listed, not mirrored)."""
        if objects.is_remote(self.root):
            return {rel.split("/", 1)[0] for rel in objects.list_files(self.root) if "/" in rel}
        root = Path(self.root)
        return {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()

    def scan(self) -> Scan:
        """Every checkpoint folder under the root as it is now (complete, incomplete, refused)."""
        return scan_checkpoints(self.folder())

    def load(self, checkpoint_id: str) -> Checkpoint:
        folder = checkpoint_folder(checkpoint_id, self.folder(checkpoint_id))
        if not folder.is_dir():
            raise CheckpointError(f"checkpoint {checkpoint_id!r}: no folder {folder}")
        return read_checkpoint(folder)


class RatingsSource(dg.ConfigurableResource[Any]):
    """Human rating CSVs, one folder per rubric (EVAL_RATINGS_DIR, default data/human_ratings; an ``s3://``
    folder on several machines)."""

    root: str = Field(default_factory=settings.ratings_location)

    def folder(self, rubric: str | None = None) -> Path:
        """The local folder of every rubric's ratings (an ``s3://`` root mirrored: only ``rubric``'s when given)."""
        return _local(self.root, rubric)


class PublishTargets(dg.ConfigurableResource[Any]):
    """Where files for people are written: worklists (EVAL_WORKLIST_DIR) and the report (EVAL_REPORT_DIR)."""

    worklist_dir: str = Field(default_factory=settings.worklist_location)
    report_dir: str = Field(default_factory=lambda: str(settings.report_dir()))

    def worklist_folder(self) -> Path:
        """Where worklists are written on this machine (for an ``s3://`` target, the folder ``publish`` uploads)."""
        return settings.local_folder(self.worklist_dir)

    def publish(self, files: list[Path]) -> None:
        """Worklist ``files`` written below ``worklist_folder()`` sent to an ``s3://`` target (a folder has them)."""
        if not objects.is_remote(self.worklist_dir):
            return
        base = self.worklist_folder()
        for f in files:
            objects.upload(f, objects.join(self.worklist_dir, f.relative_to(base).as_posix()))


class JudgeResourceBase(dg.ConfigurableResource[Any]):
    """The judge: which backend scores samples (judge.backends) and how its calls are made. ``JudgeResource`` is
    this with one optional field for each setting of ``core.settings.JudgeConfig`` an environment variable sets
    (made from those fields, so a knob added there is settable here with nothing else written).

    A field left unset takes the environment's value when the run starts (docs/operating.md lists the variables);
    a run's resource config sets any of them. Both become one validated ``JudgeConfig``, made once per run and
    handed as it is to the backend, which makes each judge's settings from it (``JudgeConfig.for_judge``), and to
    the judge steps, which draw on the run's budget. The key is read from OPENAI_API_KEY by the client alone: it is
    never in run config, metadata or the warehouse."""

    _config: JudgeConfig | None = PrivateAttr(default=None)

    def config(self) -> JudgeConfig:
        """The environment's judge settings with this resource's over them (made once, then the same object)."""
        if self._config is None:
            given = {name: getattr(self, name) for name in KNOBS}
            self._config = settings.judge_config().with_(**given)
        return self._config

    def identity(self, rubric: RubricConfig, at: JudgedAt | None = None) -> JudgeIdentity:
        """Who judges ``rubric`` (recorded with its scores; where ``at`` says when the judge comes with the data)."""
        return identity_of(rubric, self.config(), at)

    def score(
        self, rubric: RubricConfig, ckpt: str, records: list[Record], wh: Warehouse, repeat: int = 0
    ) -> tuple[pd.DataFrame, JudgeRunStats]:
        """``records`` scored by the rubric's panel with the panel's aggregate (judge.runner.judge_samples)."""
        return judge_samples(rubric, ckpt, records, wh, self.config(), repeat)

    def extract(
        self, rubric: RubricConfig, ckpt: str, records: list[Record], wh: Warehouse
    ) -> tuple[pd.DataFrame, JudgeRunStats]:
        """The rubric's LLM extraction of ``records`` (judge.extraction.extract)."""
        return extract(rubric, ckpt, records, wh, self.config())


KNOBS = {f.name: f for f in dataclasses.fields(JudgeConfig) if f.metadata.get("env")}


def _with_knobs(base: type[JudgeResourceBase]) -> type[JudgeResourceBase]:
    """``base`` with an optional field (default unset) for every setting in ``KNOBS``, typed as the setting is."""
    hints = typing.get_type_hints(JudgeConfig)
    fields = {name: hints[name] | None for name in KNOBS}
    namespace = {"__module__": __name__, "__qualname__": "JudgeResource", "__annotations__": fields}
    return type("JudgeResource", (base,), {**namespace, **dict.fromkeys(fields)})


if TYPE_CHECKING:
    JudgeResource = JudgeResourceBase
else:
    JudgeResource = _with_knobs(JudgeResourceBase)


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
