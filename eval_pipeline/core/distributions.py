"""The few distribution functions the statistics need, from ``scipy.special`` (what ``scipy.stats`` calls for them),
imported when first called.

Contract: each function returns exactly what the ``scipy.stats`` call named in its docstring returns (the same
special function on the same arithmetic; tests/core/test_distributions.py compares them value for value). Why not
``scipy.stats`` itself: importing it costs about 1.5 CPU-seconds (it parses its distributions' docstrings at
import), paid by every process that builds the Dagster definitions — each command, code server and launched run —
whether or not it computes a statistic. ``scipy.special`` costs a third of that, and only in a process that calls one
of these.
"""

from __future__ import annotations

import numpy as np


def norm_ppf(q: float) -> float:
    """``scipy.stats.norm.ppf(q)``: the standard normal's quantile."""
    from scipy import special

    return float(special.ndtri(q))


def norm_sf(x: float) -> float:
    """``scipy.stats.norm.sf(x)``: the standard normal's upper tail."""
    from scipy import special

    return float(special.ndtr(-x))


def t_ppf(q: float, df: float) -> float:
    """``scipy.stats.t.ppf(q, df)``: Student's t quantile with ``df`` degrees of freedom."""
    from scipy import special

    return float(special.stdtrit(df, q))


def t_test_p(d: np.ndarray) -> float:
    """``scipy.stats.ttest_1samp(d, 0.0).pvalue``: the two-sided p-value that the mean of the values ``d`` is 0 (at
    least two, not all equal: the caller's cases; the t statistic computed as scipy does)."""
    from scipy import special

    d = np.asarray(d, float)
    n = len(d)
    mean = np.mean(d)
    var = np.mean((d - mean) ** 2) * (n / (n - 1))  # scipy's _var(ddof=1), in its order
    return float(2 * special.stdtr(n - 1.0, -abs(mean / np.sqrt(var / n))))


def average_ranks(x: np.ndarray) -> np.ndarray:
    """``scipy.stats.rankdata(x, axis=-1)``: ranks from 1 along the last axis, tied values sharing the mean of their
    ranks; a slice holding NaN is NaN throughout (scipy's ``nan_policy='propagate'``). Float64, ``x``'s shape."""
    x = np.asarray(x, float)
    if x.size == 0:
        return x.copy()
    n = x.shape[-1]
    flat = x.reshape(-1, n)
    rows = flat.shape[0]
    order = np.argsort(flat, axis=1, kind="mergesort")
    s = np.take_along_axis(flat, order, axis=1)
    new = np.ones(s.shape, bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    group = (np.cumsum(new, axis=1) - 1 + (np.arange(rows) * n)[:, None]).ravel()
    positions = np.broadcast_to(np.arange(n, dtype=float), s.shape).ravel()
    counts = np.bincount(group, minlength=rows * n)
    sums = np.bincount(group, weights=positions, minlength=rows * n)
    ranked = np.empty_like(flat)
    np.put_along_axis(ranked, order, (sums[group] / counts[group] + 1.0).reshape(s.shape), axis=1)
    ranked[np.isnan(flat).any(axis=1)] = np.nan
    return ranked.reshape(x.shape)
