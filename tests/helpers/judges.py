"""The judge configuration tests hand the runner: what a run reads from the environment, with the test's settings."""

from __future__ import annotations

from collections.abc import Mapping

from eval_pipeline.core.settings import JudgeConfig, judge_config


def openai_judge(settings: Mapping[str, object] | None = None, **more: object) -> JudgeConfig:
    """The environment's judge settings (OPENAI_BASE_URL, EVAL_JUDGE_* as the test set them) with the openai backend
    and ``settings`` over them."""
    return judge_config().with_(**{"mode": "openai", **(settings or {}), **more})


def judge_named(mode: str) -> JudgeConfig:
    """The environment's judge settings with the backend ``mode``."""
    return judge_config().with_(mode=mode)
