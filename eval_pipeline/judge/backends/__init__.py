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

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.registry import Registry
from eval_pipeline.judge.backends.base import JudgeBackend, JudgedAt, Judging
from eval_pipeline.judge.identity import JudgeIdentity

BACKENDS: Registry[type[JudgeBackend]] = Registry("judge backend", __name__, skip=("base",))


def backend_for(config: JudgeConfig) -> JudgeBackend:
    """The backend ``config.mode`` names; a ValueError naming the known ones otherwise."""
    try:
        return BACKENDS[config.mode]()
    except KeyError:
        raise ValueError(f"EVAL_JUDGE must be one of {', '.join(sorted(BACKENDS))}, got {config.mode!r}") from None


def identity_of(rubric: RubricConfig, config: JudgeConfig, at: JudgedAt | None = None) -> JudgeIdentity:
    """The identity of the judge that scores ``rubric`` under ``config`` (where ``at`` says, when the judge comes
    with the data)."""
    return backend_for(config).identity(rubric, config, at)


__all__ = ["BACKENDS", "JudgeBackend", "JudgedAt", "Judging", "backend_for", "identity_of"]
