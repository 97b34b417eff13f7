"""The seeded percentile bootstrap behind every confidence interval of the pipeline (summaries,
checkpoint comparisons, agreement statistics).

A statistic is computed for many resamples at once from an index matrix (resamples x n): row i holds
exactly the draws that n_boot successive ``integers(0, n, n)`` calls would make, so the same seed gives the
same interval whichever way a statistic is computed. The matrix is drawn in blocks of about
``BLOCK_CELLS`` cells (the generator's stream is the same in blocks as in one call), so memory stays
bounded on a 100k-sample checkpoint (2000 x 100k indices would be 1.6 GB). The mean of a score with few
distinct values is resampled from its value counts instead (``joint_bootstrap_ci``): the same distribution of
resampled means for n_boot x d draws.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd

Statistic = Callable[..., np.ndarray]  # (*arrays, idx) -> one value per row of idx
BLOCK_CELLS = 2_000_000  # indices drawn (and resampled values held) at once: 16 MB of int64
# A mean over at most FEW_VALUES distinct values, and at most one per COUNTS_PER_ITEM items, is resampled from its
# value counts: a count costs several index draws, so this pays only when the items far outnumber their values
FEW_VALUES = 256
COUNTS_PER_ITEM = 6


def in_item_order(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``frame``'s rows sorted by ``keys`` (the columns that name an item): every statistic is computed over rows in
    this order, not in the order the warehouse returned them, which DuckDB does not keep (preserve_insertion_order
    is off) and which changed with how a table was written. A bootstrap draws items by position, and a sum's last
    bits depend on the order of its terms: the same rows gave other intervals when they came back in another order."""
    return frame.sort_values([k for k in keys if k in frame.columns], kind="stable", ignore_index=True)


def seed_of(*parts: object) -> int:
    """A bootstrap's seed from what it is about (rubric, checkpoint, score...): the same interval on every run."""
    return zlib.crc32("|".join(map(str, parts)).encode())


def items_seed(ratings: pd.DataFrame, *parts: object) -> int:
    """A bootstrap's seed from what it is about (``parts``) and the items it resamples (``ratings``' checkpoint and
    sample ids), not from the label of the row it fills: the same items give the same interval, so a judge that
    scored one checkpoint has one interval per statistic, not one on the checkpoint's row and another on its pooled
    row (#72)."""
    items = pd.unique(ratings["checkpoint_id"].astype(str) + "\x1f" + ratings["sample_id"].astype(str))
    return seed_of(*parts, hashlib.sha1("\x1e".join(sorted(items)).encode()).hexdigest())


def percentile_ci(
    statistic: Statistic, arrays: list[np.ndarray], seed: int, n_boot: int, level: float = 0.95, min_n: int = 2
) -> tuple[float, float]:
    """Percentile CI of ``statistic`` over items resampled with replacement; NaN when there are fewer
    than ``min_n`` items or fewer than half the resamples give a finite value."""
    return shared_percentile_cis([(statistic, arrays)], seed, n_boot, level, min_n)[0]


def shared_percentile_cis(
    statistics: list[tuple[Statistic, list[np.ndarray]]],
    seed: int,
    n_boot: int,
    level: float = 0.95,
    min_n: int = 2,
) -> list[tuple[float, float]]:
    """Several statistics over the same items, from the same resamples: each gets exactly the interval
    ``percentile_ci`` gives it with this seed, for one draw of the indices instead of one per statistic."""
    n = len(statistics[0][1][0])
    if n < min_n:
        return [(float("nan"), float("nan"))] * len(statistics)
    blocks: list[list[np.ndarray]] = [[] for _ in statistics]
    for idx in _index_blocks(n, seed, n_boot):
        for k, (statistic, arrays) in enumerate(statistics):
            blocks[k].append(np.asarray(statistic(*arrays, idx), float))
    out = []
    for b in blocks:
        vals = np.concatenate(b)
        vals = vals[np.isfinite(vals)]
        out.append((float("nan"), float("nan")) if len(vals) < n_boot // 2 else _interval(vals, level))
    return out


def _index_blocks(n: int, seed: int, n_boot: int) -> Iterator[np.ndarray]:
    """The (n_boot, n) index matrix of a seed, in blocks of about BLOCK_CELLS cells (the same draws as one call)."""
    rng = np.random.default_rng(seed)
    rows = max(1, BLOCK_CELLS // n)
    for start in range(0, n_boot, rows):
        yield rng.integers(0, n, (min(rows, n_boot - start), n))


def _interval(vals: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1 - level) / 2
    lo, hi = np.quantile(vals, [alpha, 1 - alpha])  # one sort for both ends (the same values as two calls)
    return float(lo), float(hi)


def counts_per_row(codes: np.ndarray, k: int) -> np.ndarray:
    """How often each code 0..k-1 occurs in each row of ``codes`` (rows x n): a (rows x k) matrix, one bincount."""
    m = codes.shape[0]
    return np.bincount((np.arange(m)[:, None] * k + codes).ravel(), minlength=m * k).reshape(m, k)


def joint_bootstrap_ci(
    matrix: np.ndarray, seed: int, n_boot: int, level: float = 0.95, min_n: int = 1
) -> list[tuple[float, float]]:
    """Percentile bootstrap CIs of the mean of every column of ``matrix`` (items x scores, no missing value).

    A resample's mean depends only on how often each distinct value is drawn, and those counts are
    multinomial (n, each value's share): a column with few distinct values for its items (a Likert score, a
    pass/fail share, a sum of a few of them; see FEW_VALUES) draws them directly, n_boot x d numbers instead of
    n_boot x n indices, with the very same distribution of resampled
    means. Which way a column goes depends on the column alone.
    Each such column uses the seed alone, so its interval is the one it gets on its own. The other columns
    share one index matrix (``_index_blocks``): each resample's counts times the matrix give every column's
    mean. Fewer than ``min_n`` items: NaN; one item (when allowed): its value."""
    n, k = matrix.shape
    if n == 0 or n < min_n:
        return [(float("nan"), float("nan"))] * k
    if n == 1:
        return [(float(v), float(v)) for v in matrix[0]]
    out: list[tuple[float, float]] = [(float("nan"), float("nan"))] * k
    many: list[int] = []
    for j in range(k):
        values, counts = np.unique(matrix[:, j], return_counts=True)
        if len(values) > FEW_VALUES or len(values) * COUNTS_PER_ITEM > n:
            many.append(j)
            continue
        drawn = np.random.default_rng(seed).multinomial(n, counts / n, size=n_boot)
        out[j] = _interval(drawn @ values / n, level)
    if many:
        sub = matrix[:, many]
        vals = np.vstack([counts_per_row(idx, n) @ sub / n for idx in _index_blocks(n, seed, n_boot)])
        for i, j in enumerate(many):
            out[j] = _interval(vals[:, i], level)
    return out


def mean_intervals(
    values: dict[Any, np.ndarray], about: tuple[Any, ...], n_boot: int, min_n: int = 1
) -> dict[Any, tuple[float, float]]:
    """The bootstrap CI of the mean of every series (NaN where an item lacks it). Series present on the same
    items share one set of resamples (joint_bootstrap_ci), seeded by what they are ``about`` and, unless every
    item has them, by their names (a series alone with gaps keeps the seed it would have on its own)."""
    by_mask: dict[bytes, list[Any]] = {}
    for name, v in values.items():
        by_mask.setdefault(np.isnan(v).tobytes(), []).append(name)
    out: dict[Any, tuple[float, float]] = {}
    for names in by_mask.values():
        present = ~np.isnan(values[names[0]])
        labels = [] if present.all() else [n if isinstance(n, str) else f"{n[0]}={n[1]}" for n in names]
        matrix = np.column_stack([values[n][present] for n in names])
        out.update(zip(names, joint_bootstrap_ci(matrix, seed_of(*about, *labels), n_boot, min_n=min_n), strict=True))
    return out


def resampled_mean(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.asarray(values[idx].mean(axis=1))


def per_resample(fn: Callable[..., float]) -> Statistic:
    """A scalar statistic applied resample by resample (the reference the vectorised ones are tested against)."""

    def statistic(*arrays_and_idx: np.ndarray) -> np.ndarray:
        *arrays, idx = arrays_and_idx
        return np.array([fn(*[a[i] for a in arrays]) for i in idx], float)

    return statistic
