"""Rate what settles it first: the order of the remainder queue, and the weights that keep estimates unbiased.

Active statistical inference (Zrnic & Candès 2024, "Active statistical inference", ICML): people rate item i with a
probability pi_i that grows with how unsure the judge is of it, never below a floor, and every estimate weighs a
rated item by 1 / pi_i, so it stays unbiased whatever the order. Where the judge errs most, one rating removes the
most variance; where it is already certain, a rating adds little.

The queue is an *order sample* (sequential Poisson sampling, Ohlsson 1998): each item draws a seeded uniform
``u_i`` and is queued by ``u_i / w_i`` (``w_i`` its priority). An evaluator who rated the first n items of that
order has drawn a Poisson sample with ``pi_i = min(1, tau * w_i)``, ``tau`` the (n+1)-th smallest key: so the
inclusion probability of every rated item is known from the order alone, whenever the evaluator stops.

Priorities (``priorities``): ``w_i = floor + (1 - floor) * s_i / mean(s)``, ``s_i`` the judge's uncertainty on the
item (the standard deviation of its score distribution from token probabilities, or the spread of a panel's
members or repeats), so every item keeps at least ``floor`` of the average item's chance. Without any uncertainty
(the offline judge), every weight is 1 and the order is a seeded shuffle.

The mean of the people's score over all N items (``ipw_mean``): ``mean(f) + sum_rated (y_i - f_i) / pi_i / N``
(a difference estimator, Horvitz-Thompson on the residuals), with the Poisson design's unbiased variance
``sum_rated (1 - pi_i) (y_i - f_i)² / pi_i² / N²`` and a normal interval. With equal probabilities it is the
prediction-powered mean with lambda = 1. Checked by ``bench/bench_trust_decisions.py``: coverage and ratings to a
given interval width, random order against this one.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from eval_pipeline.core.contracts import PANEL

DEFAULT_FLOOR = 0.2


def priorities(uncertainty: np.ndarray, floor: float = DEFAULT_FLOOR) -> np.ndarray:
    """Each item's weight from the judge's uncertainty on it (NaN: unknown, the average is used); all 1 when no
    item has a known, positive uncertainty."""
    s = np.asarray(uncertainty, float)
    known = s[~np.isnan(s)]
    if not len(known) or not (known > 0).any():
        return np.ones(len(s))
    s = np.where(np.isnan(s), known.mean(), np.maximum(s, 0.0))
    return np.asarray(floor + (1.0 - floor) * s / s.mean(), float)


def _spread(distribution: object) -> float:
    """The standard deviation of a score distribution stored as JSON ``{value: probability}`` (NaN if none)."""
    if not isinstance(distribution, str) or not distribution:
        return math.nan
    try:
        d = json.loads(distribution)
        values = np.array([float(k) for k in d], float)
        p = np.array([float(v) for v in d.values()], float)
    except (ValueError, TypeError, AttributeError):
        return math.nan
    if not len(p) or p.sum() <= 0:
        return math.nan
    p = p / p.sum()
    m = float((p * values).sum())
    return float(math.sqrt(max(float((p * (values - m) ** 2).sum()), 0.0)))


def judge_uncertainty(judge_long: pd.DataFrame) -> dict[str, float]:
    """How unsure the judge is of each sample, averaged over its dimensions: the spread of the panel's score
    distribution (token probabilities) where there is one, else the spread of the panel members' scores; samples
    with neither are left out. ``judge_long``: judge_scores rows (sample_id, judge, dimension, score and, when
    recorded, score_distribution)."""
    if judge_long.empty:
        return {}
    rows = judge_long[judge_long.get("kind", pd.Series("dimension", index=judge_long.index)) != "questionnaire_item"]
    panel = rows[rows.judge == PANEL]
    spread = pd.Series(dtype=float)
    if "score_distribution" in panel.columns:
        sd = panel.score_distribution.map(_spread)
        spread = pd.Series(sd.to_numpy(), index=[panel.sample_id.astype(str), panel.dimension]).dropna()
    members = rows[rows.judge != PANEL].dropna(subset=["score"])
    if len(members):
        by = members.groupby([members.sample_id.astype(str), "dimension"]).score.std(ddof=0).dropna()
        spread = spread.combine_first(by) if len(spread) else by
    if not len(spread):
        return {}
    per_sample = spread.groupby(level=0).mean()
    return {str(k): float(v) for k, v in per_sample.items()}


def uniforms(ids: list[str], seed: int) -> np.ndarray:
    """A seeded uniform in (0, 1) per item, from its id alone (the same whatever else is in the queue)."""
    out = np.empty(len(ids))
    for k, sid in enumerate(ids):
        h = hashlib.blake2b(f"{seed}:{sid}".encode(), digest_size=8).digest()
        out[k] = (int.from_bytes(h, "big") + 0.5) / 2.0**64
    return out


def order(ids: list[str], weights: np.ndarray, seed: int) -> tuple[list[str], np.ndarray]:
    """The queue's order (ascending ``u_i / w_i``) and each item's key, in that order."""
    keys = uniforms(ids, seed) / np.asarray(weights, float)
    at = np.argsort(keys, kind="stable")
    return [ids[i] for i in at], keys[at]


def inclusion(keys_rated: np.ndarray, weights_rated: np.ndarray, tau: float) -> np.ndarray:
    """Inclusion probabilities of the rated items of an order sample: ``min(1, tau * w_i)``, ``tau`` the key of the
    first item not rated (inf: every item rated, probability 1)."""
    w = np.asarray(weights_rated, float)
    if not math.isfinite(tau):
        return np.ones(len(w))
    return np.minimum(1.0, tau * w)


@dataclass(frozen=True)
class Estimate:
    mean: float
    ci_low: float
    ci_high: float
    se: float
    n_rated: int


def ipw_mean(
    judge_all: np.ndarray, judge_rated: np.ndarray, people_rated: np.ndarray, pi: np.ndarray, alpha: float = 0.05
) -> Estimate:
    """The people's mean over all items from the judge's scores of all (``judge_all``) and the rated items' judge
    scores, people's scores and inclusion probabilities."""
    n_all = len(judge_all)
    r = np.asarray(people_rated, float) - np.asarray(judge_rated, float)
    pi = np.asarray(pi, float)
    mean = float(np.mean(judge_all) + (r / pi).sum() / n_all)
    var = float(((1.0 - pi) * r * r / (pi * pi)).sum() / (n_all * n_all))
    se = math.sqrt(max(var, 0.0))
    z = float(sps.norm.ppf(1 - alpha / 2))
    return Estimate(mean, mean - z * se, mean + z * se, se, len(r))
