"""Judge backends: who scores a rubric's samples. One module each, registered in ``BACKENDS`` under the name
``EVAL_JUDGE`` selects (``heuristic``: offline and rule-based; ``openai``: any OpenAI-compatible endpoint;
``imported``: the scores of a judge the team already ran, brought with each checkpoint).

A backend says who it is (``identity``: recorded with every judge_scores partition, so numbers from different
judges are never compared), scores records into judge_scores rows (``score``), and says whether it asks a model
over the network (``calls_out``: extraction prompts, usage and budgets apply). Both take the run's
``JudgeConfig`` (core.settings) as it is. The runner (judge.runner) adds the panel's aggregate and the statistics;
adding a backend is adding a module here (docs/extending.md).
"""

from __future__ import annotations

from typing import Protocol

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.registry import Registry
from eval_pipeline.core.settings import JudgeConfig
from eval_pipeline.core.types import Record, Row
from eval_pipeline.judge.cached import JudgeRunStats
from eval_pipeline.judge.identity import JudgeIdentity
from eval_pipeline.storage.warehouse import Warehouse


class JudgeBackend(Protocol):
    """What a judge backend provides (see the module's docstring)."""

    calls_out: bool

    def identity(
        self, rubric: RubricConfig, config: JudgeConfig, checkpoint: str | None = None, wh: Warehouse | None = None
    ) -> JudgeIdentity:
        """Who judges ``rubric`` with this backend under ``config`` (model, endpoint, prompt version, parameters,
        panel); a backend whose judge comes with the data (``imported``) reads it for ``checkpoint`` from ``wh``."""
        ...

    def score(
        self,
        rubric: RubricConfig,
        ckpt: str,
        records: list[Record],
        wh: Warehouse,
        stats: JudgeRunStats,
        config: JudgeConfig,
        repeat: int,
    ) -> list[Row]:
        """judge_scores rows (judge.rows) of every record and judge of the panel, missing with the reason where
        an answer could not be used; ``stats`` counts prompts, calls and judges; ``repeat`` > 0 scores the same
        prompts again under their own cache keys (the judge's repeatability)."""
        ...


BACKENDS: Registry[type[JudgeBackend]] = Registry("judge backend", __name__)


def backend_for(config: JudgeConfig) -> JudgeBackend:
    """The backend ``config.mode`` names; a ValueError naming the known ones otherwise."""
    try:
        return BACKENDS[config.mode]()
    except KeyError:
        raise ValueError(f"EVAL_JUDGE must be one of {', '.join(sorted(BACKENDS))}, got {config.mode!r}") from None


def identity_of(
    rubric: RubricConfig, config: JudgeConfig, checkpoint: str | None = None, wh: Warehouse | None = None
) -> JudgeIdentity:
    """The identity of the judge that scores ``rubric`` under ``config`` (for ``checkpoint``, read from ``wh``,
    when the judge comes with the data)."""
    return backend_for(config).identity(rubric, config, checkpoint, wh)
