"""The judge configuration tests hand the runner: what a run reads from the environment, with the test's settings."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from eval_pipeline.core.judge_config import JudgeConfig, judge_config


def openai_judge(settings: Mapping[str, object] | None = None, **more: object) -> JudgeConfig:
    """The environment's judge settings (OPENAI_BASE_URL, EVAL_JUDGE_* as the test set them) with the openai backend
    and ``settings`` over them."""
    return judge_config().with_(**{"mode": "openai", **(settings or {}), **more})


def judge_named(mode: str) -> JudgeConfig:
    """The environment's judge settings with the backend ``mode``."""
    return judge_config().with_(mode=mode)


def judge_long(scores: dict[str, dict[str, float | None]], kind: str = "dimension") -> pd.DataFrame:
    """The panel's judge_scores rows of checkpoint ``c`` (sample -> dimension -> score; None: missing)."""
    rows = []
    for sid, dims in scores.items():
        for dim, v in dims.items():
            rows.append(
                dict(
                    checkpoint_id="c",
                    sample_id=sid,
                    judge="panel",
                    judge_kind="heuristic",
                    model="rules",
                    dimension=dim,
                    kind=kind,
                    score=v,
                    status="ok" if v is not None else "missing",
                    reason=None if v is not None else "unparseable answer",
                )
            )
    return pd.DataFrame(rows)
