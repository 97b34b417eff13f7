"""What a judge backend provides (the package's docstring says how backends are chosen)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import Record, Row
from eval_pipeline.judge.cached import JudgeRunStats
from eval_pipeline.judge.identity import JudgeIdentity
from eval_pipeline.storage.warehouse import Warehouse


@dataclass(frozen=True)
class JudgedAt:
    """Where a judge that comes with the data says who it is: the checkpoint, in the warehouse."""

    checkpoint: str
    wh: Warehouse


@dataclass
class Judging:
    """One judging a backend does: a checkpoint's ``records`` of ``rubric``, the warehouse (its cache), the run's
    statistics (``stats``, counted into) and judge settings, and which repeat (0: the scoring itself)."""

    rubric: RubricConfig
    checkpoint: str
    records: list[Record]
    wh: Warehouse
    stats: JudgeRunStats
    config: JudgeConfig
    repeat: int = 0

    def unpacked(
        self,
    ) -> tuple[RubricConfig, str, list[Record], Warehouse, JudgeRunStats, JudgeConfig, int]:
        return self.rubric, self.checkpoint, self.records, self.wh, self.stats, self.config, self.repeat


class JudgeBackend(Protocol):
    """What a judge backend provides (see the module's docstring)."""

    calls_out: bool

    def identity(self, rubric: RubricConfig, config: JudgeConfig, at: JudgedAt | None = None) -> JudgeIdentity:
        """Who judges ``rubric`` with this backend under ``config`` (model, endpoint, prompt version, parameters,
        panel); a backend whose judge comes with the data (``imported``) reads it where ``at`` says."""
        ...

    def score(self, job: Judging) -> list[Row]:
        """judge_scores rows (judge.rows) of every record of ``job`` and judge of the panel, missing with the reason
        where an answer could not be used; ``job.stats`` counts prompts, calls and judges; ``job.repeat`` > 0 scores
        the same prompts again under their own cache keys (the judge's repeatability)."""
        ...
