"""A synthetic panel of human ratings for tests and benchmarks of the agreement statistics at any panel size."""

from __future__ import annotations

import numpy as np
import pandas as pd


def rater_panel(
    n_raters: int, n_items: int = 60, seed: int = 3, dimension: str = "persona_consistency"
) -> pd.DataFrame:
    """``n_raters`` human raters of checkpoint ``c`` on ``n_items`` items, each rating ~80 % of them, 1-5 within one
    point of a seeded true score (the ``human_ratings`` columns the agreement step reads)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, n_items)
    rows = [
        dict(checkpoint_id="c", sample_id=f"p{i}", evaluator=f"r{k:03d}", rater_kind="human",
             dimension=dimension, score=float(np.clip(truth[i] + rng.integers(-1, 2), 1, 5)),
             source_file="f.csv", line_number=i + 2)
        for i in range(n_items) for k in range(n_raters) if rng.random() < 0.8
    ]  # fmt: skip
    return pd.DataFrame(rows)
