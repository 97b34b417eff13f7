"""What the annotate app reads and writes: the rubrics, the checkpoints with samples, each checkpoint's plan of item
lists, the people's ratings and the stored verdicts (one Workspace per app)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from eval_pipeline.agreement import plan as item_plan
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.ingest.ratings import load_ratings
from eval_pipeline.scoring.verdict import Verdict
from eval_pipeline.scoring.verdict import read as read_verdicts
from eval_pipeline.storage.warehouse import Warehouse


@dataclass
class Sample:
    sample_id: str
    fields: list[tuple[str, str, Any]]  # (name, description, value)
    response: str


class Workspace:
    """What the pages read: the warehouse's samples and verdicts, the ratings folder; cached per checkpoint (the
    item lists) and per version of the ratings folder (everybody's ratings)."""

    def __init__(self, warehouse: Warehouse, rubrics: dict[str, RubricConfig], root: Path):
        self.wh, self.rubrics, self.root = warehouse, rubrics, Path(root)
        self._plans: dict[tuple[str, str], item_plan.Plan] = {}
        self._ratings: dict[tuple[str, str], tuple[tuple[tuple[str, int, int], ...], pd.DataFrame]] = {}
        self._lock = threading.Lock()

    def rubric(self, name: str) -> RubricConfig:
        if name not in self.rubrics:
            raise KeyError(name)
        return self.rubrics[name]

    def checkpoints(self, rubric: str) -> list[str]:
        if not self.wh.exists():
            return []
        found = self.wh.read(
            rubric, Table.SAMPLES, columns=("checkpoint_id",), distinct=True, order_by=("checkpoint_id",)
        )
        return [str(c) for c in found.checkpoint_id]

    def plan(self, rubric: RubricConfig, ckpt: str) -> item_plan.Plan:
        key = (rubric.name, ckpt)
        with self._lock:
            if key in self._plans:
                return self._plans[key]
        plan = item_plan.load_plan(self.wh, rubric, ckpt)
        with self._lock:
            self._plans[key] = plan
        return plan

    def _folder_version(self, rubric: str) -> tuple[tuple[str, int, int], ...]:
        folder = self.root / rubric
        if not folder.is_dir():
            return ()
        return tuple(sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in folder.glob("*.csv")))

    def ratings(self, rubric: RubricConfig, ckpt: str, fresh: bool = True) -> pd.DataFrame:
        """Every evaluator's current ratings of the checkpoint, as the pipeline loads them (long form). ``fresh``
        False: the last ones read will do (after a save, where only the saver's own file changed and the caller
        reads that one itself)."""
        version = self._folder_version(rubric.name)
        key = (rubric.name, ckpt)
        with self._lock:
            hit = self._ratings.get(key)
            if hit and (hit[0] == version or not fresh):
                return hit[1]
        plan = self.plan(rubric, ckpt)
        load = load_ratings(
            rubric, ckpt, plan.ids, root=self.root, known_checkpoints=set(self.checkpoints(rubric.name))
        )
        with self._lock:
            self._ratings[key] = (version, load.ratings)
        return load.ratings

    def sample(self, rubric: RubricConfig, ckpt: str, sid: str) -> Sample | None:
        id_col = rubric.inputs.id_field
        df = self.wh.read(rubric.name, Table.SAMPLES, where={"checkpoint_id": ckpt, id_col: sid}, limit=1)
        if df.empty:
            return None
        row = df.iloc[0].to_dict()
        fields = [
            (f.name, f.description or "", row.get(f.name))
            for f in rubric.inputs.fields
            if f.name not in (id_col, rubric.inputs.response_field) and row.get(f.name) is not None
        ]
        return Sample(sid, fields, str(row.get(rubric.inputs.response_field) or ""))

    def verdict(self, rubric: str, ckpt: str) -> Verdict | None:
        try:
            found = read_verdicts(self.wh, rubric, [ckpt]) if self.wh.exists() else []
        except Exception:  # noqa: BLE001 - a warehouse being written for the first time: no verdict yet
            return None
        return found[0] if found else None
