"""The seeded percentile bootstrap behind every confidence interval of the pipeline (summaries,
checkpoint comparisons, agreement statistics).

A statistic is computed for all resamples at once from the (n_boot, n) index matrix, which is drawn
in one call: row i holds exactly the draws that n_boot successive ``integers(0, n, n)`` calls would
make, so the same seed gives the same interval whichever way a statistic is computed.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np

Statistic = Callable[..., np.ndarray]  # (*arrays, idx) -> one value per row of idx


def seed_of(*parts: object) -> int:
    """A bootstrap's seed from what it is about (rubric, checkpoint, score...): the same interval on every run."""
    return zlib.crc32("|".join(map(str, parts)).encode())


def percentile_ci(
    statistic: Statistic, arrays: list[np.ndarray], seed: int, n_boot: int, level: float = 0.95, min_n: int = 2
) -> tuple[float, float]:
    """Percentile CI of ``statistic`` over items resampled with replacement; NaN when there are fewer
    than ``min_n`` items or fewer than half the resamples give a finite value."""
    n = len(arrays[0])
    if n < min_n:
        return float("nan"), float("nan")
    idx = np.random.default_rng(seed).integers(0, n, (n_boot, n))
    vals = np.asarray(statistic(*arrays, idx), float)
    vals = vals[np.isfinite(vals)]
    if len(vals) < n_boot // 2:
        return float("nan"), float("nan")
    alpha = (1 - level) / 2
    return float(np.quantile(vals, alpha)), float(np.quantile(vals, 1 - alpha))


def resampled_mean(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return values[idx].mean(axis=1)


def per_resample(fn: Callable[..., float]) -> Statistic:
    """A scalar statistic applied resample by resample (the reference the vectorised ones are tested against)."""

    def statistic(*arrays_and_idx: np.ndarray) -> np.ndarray:
        *arrays, idx = arrays_and_idx
        return np.array([fn(*[a[i] for a in arrays]) for i in idx], float)

    return statistic
