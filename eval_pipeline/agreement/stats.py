"""Agreement statistics, each over the rubric's full scale.

Cohen's kappa weights by label *position* over the whole scale (so a 1-5 Likert
kappa is the same whichever labels happen to occur); Fleiss' kappa for many
raters; Krippendorff's alpha (nominal, ordinal, interval; missing ratings
allowed) through the `krippendorff` package; ICC two-way (absolute agreement,
ICC(2,1), and consistency, ICC(3,1)) from the ANOVA mean squares (Shrout &
Fleiss 1979). Checked in the tests against published worked examples.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TypeAlias

import numpy as np

from eval_pipeline.core.resampling import Statistic, counts_per_row, percentile_ci, shared_percentile_cis

Values: TypeAlias = Sequence[float] | np.ndarray  # ratings or scores of one rater, item by item


def percent_agreement(a: Values, b: Values) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float((a == b).mean()) if len(a) else float("nan")


def cohen_kappa(a: Values, b: Values, labels: Values, weights: str | None = None) -> float:
    """Cohen's kappa between two raters over the full label set (positions define the weights)."""
    lab = np.asarray(labels, float)
    k = len(lab)
    if len(a) == 0:
        return float("nan")
    ia = np.searchsorted(lab, np.asarray(a, float))
    ib = np.searchsorted(lab, np.asarray(b, float))
    if (
        ia.max(initial=0) >= k
        or ib.max(initial=0) >= k
        or not (np.array_equal(lab[ia], np.asarray(a, float)) and np.array_equal(lab[ib], np.asarray(b, float)))
    ):
        raise ValueError(f"ratings outside the label set {list(labels)}")
    obs = np.bincount(ia * k + ib, minlength=k * k).reshape(k, k) / len(ia)
    exp = np.outer(obs.sum(axis=1), obs.sum(axis=0))
    w = _weights(k, weights)
    de = (w * exp).sum()
    if de == 0:
        return float("nan")  # no disagreement is possible by chance: kappa is undefined
    return float(1 - (w * obs).sum() / de)


def gwet_ac1(a: Values, b: Values, labels: Values) -> float:
    """Gwet's (2008) AC1 between two raters over the full label set (nominal): ``(pa - pe) / (1 - pe)`` with pa the
    share of items they agree on and ``pe = sum_k pi_k (1 - pi_k) / (q - 1)``, pi_k the mean of the two raters'
    shares of category k and q the number of categories. Robust to prevalence where kappa is not (kappa's paradox:
    high agreement on a skewed scale, kappa near 0)."""
    lab = np.asarray(labels, float)
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) == 0 or len(lab) < 2:
        return float("nan")
    pa = float((a == b).mean())
    pi = np.array([((a == v).mean() + (b == v).mean()) / 2 for v in lab])
    pe = float((pi * (1 - pi)).sum() / (len(lab) - 1))
    return float("nan") if pe >= 1 else (pa - pe) / (1 - pe)


@lru_cache(maxsize=64)
def _weights(k: int, weights: str | None) -> np.ndarray:
    i, j = np.indices((k, k))
    if weights is None:
        return np.asarray(i != j, dtype=float)
    if weights == "linear":
        return np.asarray(np.abs(i - j) / max(1, k - 1))
    if weights == "quadratic":
        return ((i - j) / max(1, k - 1)) ** 2
    raise ValueError(weights)


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa from an items x categories matrix of rater counts (same number of raters per item)."""
    counts = np.asarray(counts, float)
    n_items = counts.shape[0]
    n = counts.sum(axis=1)
    if n_items == 0 or not np.all(n == n[0]) or n[0] < 2:
        return float("nan")
    n = n[0]
    p_j = counts.sum(axis=0) / (n_items * n)
    p_i = (np.square(counts).sum(axis=1) - n) / (n * (n - 1))
    p_bar, pe = p_i.mean(), np.square(p_j).sum()
    return float((p_bar - pe) / (1 - pe)) if pe != 1 else float("nan")


def krippendorff_alpha(data: np.ndarray, level: str, value_domain: Values | None = None) -> float:
    """Krippendorff's alpha; `data` is raters x items with NaN for missing ratings."""
    import krippendorff

    data = np.asarray(data, float)
    if np.count_nonzero(~np.isnan(data).all(axis=0)) < 2:
        return float("nan")
    pairable = (np.sum(~np.isnan(data), axis=0) >= 2).sum()
    if pairable < 1:
        return float("nan")
    kwargs: dict[str, Any] = {}
    if level in ("nominal", "ordinal") and value_domain is not None:
        kwargs["value_domain"] = list(value_domain)
    try:
        with np.errstate(invalid="ignore", divide="ignore"):  # one value, no expected disagreement: NaN
            return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level, **kwargs))  # type: ignore[arg-type]
    except (ValueError, ZeroDivisionError):
        return float("nan")


def icc(matrix: np.ndarray) -> tuple[float, float]:
    """(ICC(2,1) absolute agreement, ICC(3,1) consistency) for an items x raters matrix without missing values."""
    x = np.asarray(matrix, float)
    n, k = x.shape
    if n < 2 or k < 2:
        return float("nan"), float("nan")
    grand = x.mean()
    ss_rows = k * np.square(x.mean(axis=1) - grand).sum()
    ss_cols = n * np.square(x.mean(axis=0) - grand).sum()
    ss_err = np.square(x - grand).sum() - ss_rows - ss_cols
    msr = ss_rows / (n - 1)
    msc = ss_cols / (k - 1)
    mse = ss_err / ((n - 1) * (k - 1))
    den_a = msr + (k - 1) * mse + k * (msc - mse) / n
    den_c = msr + (k - 1) * mse
    a = (msr - mse) / den_a if den_a else float("nan")
    c = (msr - mse) / den_c if den_c else float("nan")
    return float(a), float(c)


def spearman(a: Values, b: Values) -> float:
    """Spearman's rho: the Pearson correlation of average ranks (scipy.stats.spearmanr's, which the tests compare
    it with), computed as ``spearman_resamples`` of the items as they are; NaN below 3 items, when a side is
    constant, or when a value is missing (scipy's default). Not scipy's own: importing scipy.stats is slow, and
    each run is a process of its own."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3 or np.std(a) == 0 or np.std(b) == 0 or np.isnan(a).any() or np.isnan(b).any():
        return float("nan")
    return float(spearman_resamples(a, b, np.arange(len(a))[None, :])[0])


def kendall(a: Values, b: Values) -> float:
    """Kendall's tau-b, ties corrected (scipy.stats.kendalltau's, which the tests compare it with), computed as
    ``kendall_resamples`` of the items as they are; NaN below 3 items, when a side is constant, or when a value
    is missing."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3 or np.std(a) == 0 or np.std(b) == 0 or np.isnan(a).any() or np.isnan(b).any():
        return float("nan")
    return float(kendall_resamples(a, b, np.arange(len(a))[None, :])[0])


def _constant_rows(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.std(x, axis=1) == 0)


def _resampled_ranks(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The average ranks (ties share their mean rank, as scipy's rankdata) of every resample's values, without
    sorting: the values' distinct levels are counted per resample, and a level's rank is the count below it
    plus half its own count (plus one half). O(resamples x n), where sorting each resample is O(n log n)."""
    levels, code = np.unique(values, return_inverse=True)
    coded = code[idx]
    counts = counts_per_row(coded, len(levels))
    below = np.cumsum(counts, axis=1) - counts
    mid = below + (counts + 1) / 2.0
    return np.take_along_axis(mid, coded, axis=1)


# the largest (levels of a) x (levels of b) table spearman_resamples counts, as a multiple of the items; past
# it (two near-continuous variables) each resample's ranks are gathered item by item instead
SPEARMAN_TABLE_PER_ITEM = 4


def rank_codes(values: Values) -> np.ndarray:
    """Each (finite) value's level, 0 for the smallest: all a rank statistic needs of the values. A caller that
    bootstraps one statistic over many blocks of resamples passes these, so the levels are found once."""
    return np.unique(np.asarray(values, float), return_inverse=True)[1].astype(np.int64).reshape(-1)


def _levels(values: Values) -> np.ndarray:
    v = np.asarray(values)
    if v.dtype.kind in "iu":  # levels already (rank_codes), or integers in their order
        return np.asarray(v - v.min(), dtype=np.int64)
    return rank_codes(v)


def spearman_resamples(a: Values, b: Values, idx: np.ndarray) -> np.ndarray:
    """spearman(a[i], b[i]) for every row i of the index matrix, vectorised (NaN where undefined).

    From each resample's contingency table of (a, b) levels when it is small (scores on a scale against
    lengths): a level's mid-rank is the count below it plus half its own, and the rank products are summed
    over the table's cells instead of over n items, so a resample costs one bincount of its codes rather than
    two gathers of n ranks and their products (100k items: ~5x less time and memory)."""
    xa, yb = np.asarray(a, float), np.asarray(b, float)
    m, n = idx.shape
    if n == 0:
        return np.full(m, np.nan)  # no items: undefined (not a mean of nothing, which numpy warns about)
    if np.isfinite(xa).all() and np.isfinite(yb).all():
        xi, yi = _levels(a), _levels(b)
        kx, ky = int(xi.max()) + 1, int(yi.max()) + 1
        if kx * ky <= SPEARMAN_TABLE_PER_ITEM * max(n, 1024):
            c = counts_per_row((xi * ky + yi)[idx], kx * ky).reshape(m, kx, ky).astype(float)
            cx, cy = c.sum(axis=2), c.sum(axis=1)
            centre = (n + 1) / 2.0
            rx = np.cumsum(cx, axis=1) - (cx - 1) / 2.0 - centre  # centred mid-ranks of each level
            ry = np.cumsum(cy, axis=1) - (cy - 1) / 2.0 - centre
            num = np.einsum("mi,mij,mj->m", rx, c, ry)
            with np.errstate(invalid="ignore", divide="ignore"):
                r = num / np.sqrt((cx * rx * rx).sum(axis=1) * (cy * ry * ry).sum(axis=1))
            r = np.clip(r, -1.0, 1.0)
            r[((cx > 0).sum(axis=1) < 2) | ((cy > 0).sum(axis=1) < 2) | (n < 3)] = np.nan
            return np.asarray(r)
    x, y = xa[idx], yb[idx]
    rx, ry = _resampled_ranks(xa, idx), _resampled_ranks(yb, idx)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    r = np.clip(r, -1.0, 1.0)
    r[_constant_rows(x) | _constant_rows(y) | (idx.shape[1] < 3)] = np.nan
    return np.asarray(r)


# The most table cells kendall_resamples holds at once (resamples x levels of a x levels of b): a continuous judge
# score against the human means over 20,000 pooled rated items made 300 x ~20,000 x 13 tables at once, ~0.85 GB
KENDALL_TABLE_CELLS = 4_000_000


def kendall_resamples(a: Values, b: Values, idx: np.ndarray) -> np.ndarray:
    """kendall(a[i], b[i]) (tau-b) for every row i of the index matrix, vectorised (NaN where undefined).

    From each resample's contingency table of (a, b) values rather than its n^2 pairs: concordant pairs are
    sum C[i, j] * C[i' > i, j' > j], discordant sum C[i, j] * C[i' > i, j' < j], and the pairs not tied on a
    (on b) are all pairs less those within a row (column). Scores on a scale have few distinct values, so
    the table is small; a near-continuous side makes it wide, and the resamples are then taken a block at a
    time (at most KENDALL_TABLE_CELLS cells: the same values, bounded memory)."""
    x, y = np.asarray(a, float), np.asarray(b, float)
    m, n = idx.shape
    if n == 0:
        return np.full(m, np.nan)
    _, xi = np.unique(x, return_inverse=True)
    _, yi = np.unique(y, return_inverse=True)
    kx, ky = int(xi.max()) + 1, int(yi.max()) + 1
    cells = (xi * ky + yi).reshape(-1)
    rows = max(1, KENDALL_TABLE_CELLS // (kx * ky))
    blocks = [_kendall_of_tables(cells[idx[i : i + rows]], kx, ky, n) for i in range(0, m, rows)]
    return np.concatenate(blocks) if blocks else np.full(0, np.nan)


def _kendall_of_tables(cells: np.ndarray, kx: int, ky: int, n: int) -> np.ndarray:
    """Tau-b of each row of ``cells`` (resamples x n: each drawn item's cell of the kx x ky table)."""
    m = len(cells)
    c = counts_per_row(cells, kx * ky).reshape(m, kx, ky).astype(float)
    # C[i' > i, j' > j] - C[i' > i, j' < j] for each cell, from one running sum over the rows below it: with
    # r = the column sums of the rows below, that is sum(r[j' > j]) - sum(r[j' < j]) = total - 2 run(j) + r(j).
    # Counts are whole numbers, so every sum is exact (the same s as summing the two tables apart).
    later = c.sum(axis=1)[:, None, :] - c.cumsum(axis=1)
    run = later.cumsum(axis=2)
    s = (c * (run[:, :, -1:] - 2 * run + later)).sum(axis=(1, 2))
    pairs = n * (n - 1) / 2
    rows, cols = c.sum(axis=2), c.sum(axis=1)
    n1 = pairs - (rows * (rows - 1) / 2).sum(axis=1)
    n2 = pairs - (cols * (cols - 1) / 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = s / np.sqrt(n1 * n2)
    t[(n1 == 0) | (n2 == 0) | (n < 3)] = np.nan
    return np.asarray(t)


def prevalence(values: Values) -> float:
    """Share of the most frequent category (high prevalence depresses kappa even at high agreement)."""
    vals = np.asarray(values, float)
    if len(vals) == 0:
        return float("nan")
    _, counts = np.unique(vals, return_counts=True)
    return float(counts.max() / len(vals))


def ceiling_share(values: Values, top: float) -> float:
    vals = np.asarray(values, float)
    return float((vals == top).mean()) if len(vals) else float("nan")


def kappa_band(k: float) -> str:
    """The answer-quality protocol's bands."""
    if k != k:
        return "undefined"
    return "excellent" if k >= 0.80 else "good" if k >= 0.60 else "poor"


def round_half_up(x: np.ndarray) -> np.ndarray:
    return np.floor(np.asarray(x, float) + 0.5)


def bootstrap(
    statistic: Statistic, arrays: list[np.ndarray], seed: int, n_boot: int = 300, level: float = 0.95
) -> tuple[float, float]:
    """Percentile CI of an agreement statistic over items resampled with replacement (seeded; at least 5 items)."""
    return percentile_ci(statistic, arrays, seed, n_boot, level, min_n=5)


def bootstrap_many(
    statistics: list[tuple[Statistic, list[np.ndarray]]], seed: int, n_boot: int = 300, level: float = 0.95
) -> list[tuple[float, float]]:
    """``bootstrap`` of several statistics over the same items, from one set of resamples."""
    return shared_percentile_cis(statistics, seed, n_boot, level, min_n=5)


def cohen_kappa_resamples(a: Values, b: Values, labels: Values, weights: str | None, idx: np.ndarray) -> np.ndarray:
    """cohen_kappa(a[i], b[i]) for every row i of the index matrix, vectorised (NaN where undefined)."""
    lab = np.asarray(labels, float)
    k = len(lab)
    a, b = np.asarray(a, float), np.asarray(b, float)
    cohen_kappa(a, b, labels, weights)  # validates the labels (raises like the per-resample version)
    codes = np.searchsorted(lab, a) * k + np.searchsorted(lab, b)
    m, n = idx.shape
    obs = counts_per_row(codes[idx], k * k).reshape(m, k, k) / n
    exp = obs.sum(axis=2)[:, :, None] * obs.sum(axis=1)[:, None, :]
    w = _weights(k, weights)
    de = (w * exp).reshape(m, -1).sum(axis=1)
    num = (w * obs).reshape(m, -1).sum(axis=1)
    out = np.full(m, np.nan)
    ok = de != 0
    out[ok] = 1 - num[ok] / de[ok]
    return out
