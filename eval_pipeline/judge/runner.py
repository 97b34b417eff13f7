"""Scoring a checkpoint's samples with a rubric's judge panel.

Produces the long table `<rubric>.judge_scores`: one row per sample, judge and
dimension (or questionnaire item / metric / total), with the score or, when the
answer could not be used, a missing score with its reason. The panel's
aggregate is written as judge = 'panel'; downstream assets read those rows.
"""

from __future__ import annotations

import time

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import PANEL, SCORE_COLUMNS
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import Record
from eval_pipeline.judge import costs
from eval_pipeline.judge.backends import Judging, backend_for
from eval_pipeline.judge.cached import JudgeRunStats
from eval_pipeline.judge.rows import panel_rows
from eval_pipeline.storage.warehouse import Warehouse


def judge_samples(
    rubric: RubricConfig,
    ckpt: str,
    records: list[Record],
    wh: Warehouse,
    config: JudgeConfig,
    repeat: int = 0,
) -> tuple[pd.DataFrame, JudgeRunStats]:
    """Score records with the judge backend ``config.mode`` names (judge.backends), under ``config``, and add the
    panel's aggregate; returns the long table and stats.
    ``repeat`` > 0: the same prompts scored again under their own cache keys (the judge's repeatability)."""
    backend = backend_for(config)
    stats = JudgeRunStats()
    t0 = time.perf_counter()
    rows = backend.score(Judging(rubric, ckpt, records, wh, stats, config, repeat))
    rows += panel_rows(rubric, rows, rubric.panel.aggregate)
    stats.wall_s = time.perf_counter() - t0
    df = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    df = df.astype(
        {
            "score": "float64",
            "prompt_tokens": "int64",
            "completion_tokens": "int64",
            "latency_ms": "float64",
            "attempts": "int64",
            "cached": "bool",
            "chosen_score": "float64",
            "expected_score": "float64",
            "prob_on_scale": "float64",
        }
    )
    missing = df[(df.judge == PANEL) & (df.status == "missing")]
    stats.missing = len(missing)
    for reason in missing.reason:
        key = str(reason).split(":")[0][:80]
        stats.missing_reasons[key] = stats.missing_reasons.get(key, 0) + 1
    costs.record(stats)
    return df, stats
