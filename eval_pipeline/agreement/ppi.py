"""Human-calibrated estimates of a mean: prediction-powered inference (PPI++; Angelopoulos et al. 2023, 2024).

The judge scored every sample; people rated a random subset. The judge's mean alone is biased by however the
judge leans; the people's mean alone is unbiased but wide. PPI++ takes the judge's mean over the samples people
did not rate and corrects it by the judge-human differences on the samples they did:

    theta = mean(Y) + lambda * (mean(f_unrated) - mean(f_rated))

with ``lambda`` chosen to minimise the variance and clipped to [0, 1] (``lambda = 0`` is the people's mean,
``lambda = 1`` plain PPI). The point estimate and ``lambda`` are those of the reference implementation, ``ppi_py``'s
``ppi_mean_ci``, and can be checked against it.

The interval carries a small-sample correction ppi_py's normal interval lacks: the standard error is
``sqrt(lambda**2 * var(f_unrated) / N + var(Y - lambda * f_rated) / n)`` with the unrated variance on ``N - 1``
degrees of freedom and the residual variance on ``n - 2`` when ``lambda`` was fitted on the same rated samples (a
fitted slope spends one; ``n - 1`` for a given ``lambda``, or one clipped to 0 or 1: no slope is used, and at 0 it
is the people's own t interval), and the quantile is Student's t on those degrees of
freedom. As n grows it is ppi_py's interval. Its coverage is held to at least 94 % at nominal 95 % with 40 rated
samples by simulation (``tests/agreement/test_ppi_coverage.py``; figures in docs/trust.md). The interval is valid when
the rated samples are a random subset of the checkpoint's samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from eval_pipeline.agreement.design import effective_size, hajek_variance, small_sample_factor
from eval_pipeline.core.distributions import norm_ppf, norm_sf, t_ppf


@dataclass(frozen=True)
class Estimate:
    mean: float
    ci_low: float
    ci_high: float
    n_rated: int
    n_unrated: int
    lam: float
    reason: str = ""
    se: float = math.nan  # the standard error the interval is drawn from


def _nan(n: int, big_n: int, reason: str) -> Estimate:
    return Estimate(math.nan, math.nan, math.nan, n, big_n, math.nan, reason)


def ppi_mean(
    y: np.ndarray, f_rated: np.ndarray, f_unrated: np.ndarray, alpha: float = 0.05, lam: float | None = None
) -> Estimate:
    """The PPI++ estimate of the mean of ``y`` (people's scores on the rated samples), from the judge's scores
    on the same samples (``f_rated``) and on the others (``f_unrated``). ``lam``: fixed (1 is PPI, 0 the people's
    mean alone); None: the variance-minimising value."""
    y, f, fu = (np.asarray(a, dtype=float) for a in (y, f_rated, f_unrated))
    n, big_n = len(y), len(fu)
    if n != len(f):
        raise ValueError(f"{n} human scores against {len(f)} judge scores of the rated samples")
    fitted = lam is None  # lambda fitted on the rated samples: one degree of freedom spent
    if n < (3 if fitted else 2):
        return _nan(n, big_n, f"{n} rated sample(s): at least {3 if fitted else 2} needed")
    if big_n < 2:
        return _nan(n, big_n, f"{big_n} unrated sample(s): nothing for the judge to add")
    if lam is None:
        f_all = np.concatenate([f, fu])
        var_f = float(np.var(f_all, ddof=1))
        cov = float(np.mean((y - y.mean()) * (f - f.mean())))
        lam = 0.0 if var_f == 0.0 else cov / ((1.0 + n / big_n) * var_f)
        lam = min(max(lam, 0.0), 1.0)  # clipped to [0, 1] as ppi_py clips it: never worse than people alone
        # clipped to an end, no fitted slope is used: lambda 0 is the people's mean with its own t interval, not
        # one a degree of freedom wider (#72: 8.1 % wider than people-only at n = 10), and 1 is plain PPI
        fitted = 0.0 < lam < 1.0
    point = float(np.mean(lam * fu) + np.mean(y - lam * f))
    spent = 2 if fitted else 1
    se = math.sqrt(float(np.var(lam * fu, ddof=1)) / big_n + float(np.var(y - lam * f, ddof=spent)) / n)
    q = t_ppf(1 - alpha / 2, n - spent)
    return Estimate(point, point - q * se, point + q * se, n, big_n, float(lam), se=se)


def classical_mean(values: np.ndarray, alpha: float = 0.05) -> tuple[float, float, float]:
    """A mean with its t interval (the same conventions as ``ppi_mean``: the sample variance, Student's t on n - 1
    degrees of freedom): the people-only or judge-only estimate PPI is compared with."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return math.nan, math.nan, math.nan
    q = t_ppf(1 - alpha / 2, len(v) - 1)
    m, se = float(v.mean()), float(np.std(v, ddof=1)) / math.sqrt(len(v))
    return m, m - q * se, m + q * se


CALIBRATED_COLUMNS = [
    "checkpoint_id",
    "dimension",
    "judge_mean",
    "judge_ci_low",
    "judge_ci_high",
    "human_mean",
    "human_ci_low",
    "human_ci_high",
    "calibrated_mean",
    "calibrated_ci_low",
    "calibrated_ci_high",
    "n_rated",
    "n_unrated",
    "lam",
    "reason",
]


def calibrated_means(
    checkpoint_id: str, judge: pd.DataFrame, human: pd.DataFrame, inclusion: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """Per dimension: the judge's mean, the people's mean over the samples they rated, and the PPI++ estimate,
    each with its 95 % interval. ``judge``: (sample_id, dimension, score) of the panel on every sample, on the
    people's scale; ``human``: (sample_id, dimension, score) of every human rating (their mean per sample is the
    label). ``inclusion``: when people rated by the active queue (agreement.active), each rated sample's
    inclusion probability: the calibrated estimate is then the inverse-probability-weighted one
    (``ipw_mean``), unbiased under that design; rated samples it does not name are left out of it, and
    the reason says how many."""
    rows = []
    for dim, jd in judge.groupby("dimension", sort=True):
        f_by = jd.dropna(subset=["score"]).groupby("sample_id").score.mean()
        hd = human[human.dimension == dim].dropna(subset=["score"])
        y_by = hd.groupby("sample_id").score.mean()
        both = f_by.index.intersection(y_by.index).sort_values()
        unrated = f_by.index.difference(y_by.index).sort_values()
        if inclusion:
            est = _weighted(f_by, y_by, both, inclusion)
        else:
            est = ppi_mean(y_by.loc[both].to_numpy(), f_by.loc[both].to_numpy(), f_by.loc[unrated].to_numpy())
        judged, people = classical_mean(f_by.sort_index().to_numpy()), classical_mean(y_by.loc[both].to_numpy())
        calibrated = (est.mean, est.ci_low, est.ci_high, est.n_rated, est.n_unrated, est.lam, est.reason or None)
        rows.append(
            dict(zip(CALIBRATED_COLUMNS, (checkpoint_id, str(dim), *judged, *people, *calibrated), strict=True))
        )
    return pd.DataFrame(rows, columns=CALIBRATED_COLUMNS)


def ipw_mean(
    judge_all: np.ndarray, judge_rated: np.ndarray, people_rated: np.ndarray, pi: np.ndarray, alpha: float = 0.05
) -> Estimate:
    """The people's mean over all N items under the active queue's design (``agreement.design``): a difference
    estimator, Horvitz-Thompson on the residuals, ``mean(f) + sum_rated (y_i - f_i) / pi_i / N`` (with equal
    probabilities, the prediction-powered mean with lambda = 1), from the judge's scores of all items
    (``judge_all``) and the rated items' judge scores, people's scores and inclusion probabilities. Its variance is
    the fixed-size design's (``design.hajek_variance`` of the residuals / N²), its interval normal with the design's
    small-sample factor (one moment estimated; #72.4: the Poisson design's variance with z covered 93-94 % at 60
    ratings)."""
    n_all = len(judge_all)
    r = np.asarray(people_rated, float) - np.asarray(judge_rated, float)
    pi = np.asarray(pi, float)
    n = len(r)
    mean = float(np.mean(judge_all) + (r / pi).sum() / n_all)
    if n < 2:
        return Estimate(mean, math.nan, math.nan, n, n_all - n, 1.0, f"{n} rated sample(s): at least 2 needed")
    se = math.sqrt(max(float(hajek_variance(r, pi)), 0.0)) / n_all
    half = norm_ppf(1 - alpha / 2) * se * float(small_sample_factor(effective_size(pi), 1, alpha))
    return Estimate(mean, mean - half, mean + half, n, n_all - n, 1.0, se=se)


def _weighted(f_by: pd.Series, y_by: pd.Series, both: pd.Index, inclusion: Mapping[str, float]) -> Estimate:
    """The active design's estimate of the people's mean (``ipw_mean``) as an Estimate row."""
    kept = [s for s in both if s in inclusion]
    left = len(both) - len(kept)
    if not kept:
        return Estimate(math.nan, math.nan, math.nan, 0, len(f_by), math.nan, "no rating drawn by the active queue")
    pi = np.array([inclusion[s] for s in kept], float)
    est = ipw_mean(f_by.to_numpy(float), f_by.loc[kept].to_numpy(float), y_by.loc[kept].to_numpy(float), pi)
    reason = "active queue: each rating weighted by its inclusion probability"
    if left:
        reason += f"; {left} rating(s) outside the queue's order left out"
    return replace(est, n_rated=len(kept), n_unrated=len(f_by) - len(kept), reason=reason)


@dataclass(frozen=True)
class Change:
    """The human-calibrated change of a mean from a parent checkpoint to a child: the estimate, its 95 % interval,
    a two-sided p-value that it is 0, the smallest change the design detects (power 0.8), how it was paired."""

    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    mde: float
    n_shared: int
    n_rated: int
    paired: bool
    reason: str = ""


MDE_Z = 1.959963984540054 + 0.8416212335729143  # z(1 - 0.05/2) + z(0.8)


def _z_change(delta: float, se: float, n_shared: int, n_rated: int, paired: bool, alpha: float) -> Change:
    if math.isnan(se) or math.isnan(delta):
        return Change(math.nan, math.nan, math.nan, math.nan, math.nan, n_shared, n_rated, paired, "no estimate")
    z = norm_ppf(1 - alpha / 2)
    if se == 0.0:
        p = 1.0 if delta == 0.0 else 0.0
    else:
        p = 2 * norm_sf(abs(delta) / se)
    return Change(delta, delta - z * se, delta + z * se, p, MDE_Z * se, n_shared, n_rated, paired)


def _mean_and_se(y: np.ndarray, f_rated: np.ndarray, f_unrated: np.ndarray) -> tuple[float, float]:
    """The PPI++ estimate of the people's mean and its standard error; the people's own mean (and its) when the
    judge has fewer than 2 unrated samples to add."""
    est = ppi_mean(y, f_rated, f_unrated)
    if not est.reason:
        return est.mean, est.se
    v = np.asarray(y, dtype=float)
    return float(v.mean()), float(np.std(v, ddof=1)) / math.sqrt(len(v))


def people_mean(f: pd.Series, y: pd.Series) -> tuple[float, float]:
    """One checkpoint's human-calibrated mean and its standard error: ``f`` the judge's score per sample id,
    ``y`` the people's mean per rated sample id (at least 2 rated)."""
    f, y = f.dropna(), y.dropna()
    rated = f.index.intersection(y.index).sort_values()
    unrated = f.index.difference(rated)
    return _mean_and_se(y.loc[rated].to_numpy(float), f.loc[rated].to_numpy(float), f.loc[unrated].to_numpy(float))


def ppi_change(
    f_child: pd.Series,
    y_child: pd.Series,
    f_parent: pd.Series,
    y_parent: pd.Series,
    alpha: float = 0.05,
) -> Change:
    """The PPI++ estimate of how the people's mean moved from parent to child. ``f_*``: the judge's score per
    sample id (every judged sample); ``y_*``: the people's mean per rated sample id.

    Paired when the samples rated in both checkpoints are at least half of the fewer rated (the usual design: the
    same prompts rated each time): PPI++ over the per-sample differences, the judge's differences on every shared
    sample corrected by the judge-human differences of differences on the samples rated in both. Otherwise
    (each checkpoint rated on its own random subset) the difference of the two checkpoints' PPI++ estimates with
    the sum of their variances, which is conservative when the two share prompts (their covariance is then
    positive). Fewer than 2 rated samples on a side: NaN with the reason."""
    f_child, f_parent = f_child.dropna(), f_parent.dropna()
    y_child, y_parent = y_child.dropna(), y_parent.dropna()
    shared = f_child.index.intersection(f_parent.index).sort_values()
    rated_both = shared.intersection(y_child.index).intersection(y_parent.index).sort_values()
    fewer = min(len(y_child.index.intersection(f_child.index)), len(y_parent.index.intersection(f_parent.index)))
    if fewer < 2:
        reason = f"{fewer} rated sample(s) on the less rated side: at least 2 needed"
        return Change(math.nan, math.nan, math.nan, math.nan, math.nan, len(shared), fewer, False, reason)
    if len(rated_both) >= 2 and 2 * len(rated_both) >= fewer:
        df = f_child.loc[shared] - f_parent.loc[shared]
        dy = (y_child.loc[rated_both] - y_parent.loc[rated_both]).to_numpy(dtype=float)
        unrated = shared.difference(rated_both)
        m, se = _mean_and_se(dy, df.loc[rated_both].to_numpy(dtype=float), df.loc[unrated].to_numpy(dtype=float))
        return _z_change(m, se, len(shared), len(rated_both), True, alpha)
    (mc, sc), (mp, sp) = people_mean(f_child, y_child), people_mean(f_parent, y_parent)
    return _z_change(mc - mp, math.hypot(sc, sp), len(shared), fewer, False, alpha)
