"""The judge re-scoring the rubric document's own worked examples (``judge_calibration``): the stated score, the
judged one and whether they agree within the tolerance (compared rounded: 3.999999999999808 is 4). The verdict
on the judge is agreement.trust's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import CALIBRATION_COLUMNS, PANEL

TOLERANCE_DIGITS = 6  # differences are compared rounded: a worked example judged 3.999999999999808 is 4


def within_tolerance(diff: Any, tolerance: float) -> Any:
    """Whether each judged-minus-stated difference (a number, or an array or Series of them; NaN or None: not
    judged) is within ``tolerance``, compared rounded to TOLERANCE_DIGITS. The one rule the calibration table
    and the judge_reliability gate both use."""
    return np.round(np.abs(np.asarray(diff, dtype=float)), TOLERANCE_DIGITS) <= tolerance


def calibration_rows(rubric: RubricConfig, ckpt: str, judge_long: pd.DataFrame, tolerance: float = 1.0) -> pd.DataFrame:
    panel = judge_long[judge_long.judge == PANEL].set_index(["sample_id", "dimension"])
    rows = []
    for ex in rubric.examples:
        for dim, stated in ex.scores.items():
            got = panel["score"].get((ex.id, dim))
            reason = panel["reason"].get((ex.id, dim)) if got is None or pd.isna(got) else None
            judged = None if got is None or pd.isna(got) else float(got)
            diff = None if judged is None else judged - stated
            rows.append(
                dict(
                    checkpoint_id=ckpt,
                    example_id=ex.id,
                    dimension=dim,
                    stated=float(stated),
                    judged=judged,
                    diff=diff,
                    within_tolerance=diff is not None and bool(within_tolerance(diff, tolerance)),
                    judge=str(panel["judge_kind"].iloc[0]) if len(panel) else None,
                    reason=reason,
                )
            )
    return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS).astype(
        {"stated": "float64", "judged": "float64", "diff": "float64"}
    )
