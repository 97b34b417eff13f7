"""Rate what settles it first: the order of the remainder queue, and the weights that keep estimates unbiased.

Active statistical inference (Zrnic & Candès 2024, "Active statistical inference", ICML): people rate item i with a
probability pi_i that grows with how unsure the judge is of it, never below a floor, and every estimate weighs a
rated item by 1 / pi_i, so it stays unbiased whatever the order. Where the judge errs most, one rating removes the
most variance; where it is already certain, a rating adds little.

The queue is an *order sample* (``agreement.design``: the order, each rated item's inclusion probability, the
design's variance).

Priorities (``priorities``): ``w_i = floor + (1 - floor) * s_i / mean(s)``, so every item keeps at least ``floor``
of the average item's chance. ``s_i`` is what a rating of the item would take off the variance of the open trust
decisions (``decision_uncertainty``: the judge's spread on the item, from its score distribution or a panel's
members or repeats, times the item's leverage on quadratic kappa; Neyman's allocation), or for a mean alone the
judge's spread (``judge_uncertainty``). Without any uncertainty (the offline judge), every weight is 1 and the
order is a seeded shuffle.

The estimators weigh a rated item by 1 / pi_i: the people's mean (``ppi.ipw_mean``), kappa and Spearman over the
frame (``sequential.ppi_kappa_bounds``, ``ppi_spearman_bounds``).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

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


def _moments(distribution: object) -> tuple[float, float]:
    """Mean and second moment of a score distribution stored as JSON ``{value: probability}`` (NaNs if none)."""
    if not isinstance(distribution, str) or not distribution:
        return math.nan, math.nan
    try:
        d = json.loads(distribution)
        values = np.array([float(k) for k in d], float)
        p = np.array([float(v) for v in d.values()], float)
    except (ValueError, TypeError, AttributeError):
        return math.nan, math.nan
    if not len(p) or p.sum() <= 0:
        return math.nan, math.nan
    p = p / p.sum()
    return float((p * values).sum()), float((p * values * values).sum())


def panel_predictions(judge_long: pd.DataFrame) -> pd.DataFrame:
    """The judge's prediction of people's score on each (sample, dimension), from judge_scores rows (sample_id,
    judge, dimension, score and, when recorded, score_distribution; checkpoint_id kept when present): ``score`` the
    panel's, ``mean`` and ``second`` the predicted score and its square (the panel's score distribution from token
    probabilities where there is one; else the panel's score, with the members' or repeats' variance added to its
    square), ``var`` their variance (NaN where neither distribution nor spread is known)."""
    cols = ["checkpoint_id", "sample_id", "dimension", "score", "mean", "second", "var", "distribution"]
    if judge_long.empty:
        return pd.DataFrame(columns=cols)
    rows = judge_long[judge_long.get("kind", pd.Series("dimension", index=judge_long.index)) != "questionnaire_item"]
    panel = rows[(rows.judge == PANEL) & rows.score.notna()].copy()
    panel["sample_id"] = panel.sample_id.astype(str)
    if "checkpoint_id" not in panel.columns:
        panel["checkpoint_id"] = ""
    dist = panel.get("score_distribution", pd.Series(None, index=panel.index, dtype=object))
    panel["distribution"] = dist
    m = np.array([_moments(d) for d in dist], float).reshape(-1, 2)
    panel["mean"], panel["second"] = m[:, 0], m[:, 1]
    members = rows[(rows.judge != PANEL) & rows.score.notna()]
    if len(members):
        keys = [members.sample_id.astype(str), members.dimension]
        spread = members.groupby(keys).score.var(ddof=0).rename("member_var")
        panel = panel.join(spread, on=["sample_id", "dimension"])
    else:
        panel["member_var"] = math.nan
    own = panel["mean"].notna()
    panel["var"] = np.where(own, np.maximum(panel.second - panel["mean"] ** 2, 0.0), panel.member_var)
    panel["mean"] = panel["mean"].where(own, panel.score)
    panel["second"] = panel.second.where(own, panel.score**2 + panel["var"].fillna(0.0))
    return panel[cols].reset_index(drop=True)


def level_probabilities(
    distributions: pd.Series, scores: np.ndarray, values: np.ndarray, divide: np.ndarray | float = 1.0
) -> np.ndarray:
    """The judge's predicted probability of each of ``values`` (sorted) for every item: its stored score
    distribution (JSON ``{value: probability}``, each value divided by ``divide`` and put on the nearest of
    ``values``), or all on the value nearest its score where it has none. Rows sum to one."""
    vals = np.asarray(values, float)
    k = np.broadcast_to(np.asarray(divide, float), (len(scores),))
    out = np.zeros((len(scores), len(vals)))

    def nearest(x: np.ndarray) -> np.ndarray:
        return np.asarray(np.abs(vals[None, :] - np.asarray(x, float)[:, None]).argmin(-1), int)

    for i, (d, sc) in enumerate(zip(distributions, np.asarray(scores, float), strict=True)):
        try:
            parsed = json.loads(d) if isinstance(d, str) and d else None
            keys = np.array([float(x) for x in parsed], float) / k[i] if parsed else None
            p = np.array([float(v) for v in parsed.values()], float) if parsed else None
        except (ValueError, TypeError, AttributeError):
            keys = p = None
        if keys is not None and p is not None and p.sum() > 0:
            np.add.at(out[i], nearest(keys), p / p.sum())
        else:
            out[i, nearest(np.array([sc]))[0]] = 1.0
    return out


def judge_uncertainty(judge_long: pd.DataFrame) -> dict[str, float]:
    """How unsure the judge is of each sample, averaged over its dimensions: the spread of the panel's score
    distribution (token probabilities) where there is one, else the spread of the panel members' scores; samples
    with neither are left out. ``judge_long``: judge_scores rows (sample_id, judge, dimension, score and, when
    recorded, score_distribution)."""
    pred = panel_predictions(judge_long).dropna(subset=["var"])
    if pred.empty:
        return {}
    sd = np.sqrt(pred["var"].astype(float))
    return {str(k): float(v) for k, v in sd.groupby(pred.sample_id).mean().items()}


def kappa_variance_shares(judge: np.ndarray, mean: np.ndarray, var: np.ndarray, bar: float) -> np.ndarray | None:
    """Each item's share of the variance a rating of it removes from quadratic kappa's estimator at kappa = ``bar``
    (``decision_uncertainty``'s e², divided by its mean; along the last axis), or None when kappa is undefined or
    the judge is certain of every item."""
    j, h, v = (np.asarray(a, float) for a in (judge, mean, var))
    mj = j.mean(-1, keepdims=True)
    den = (j * j).mean(-1, keepdims=True) + (h * h + v).mean(-1, keepdims=True) - 2.0 * mj * h.mean(-1, keepdims=True)
    if not (den > 0).all():
        return None
    lev = (2.0 / den) * ((j - mj) - bar * (h - mj))
    e2 = lev * lev * v + 2.0 * (bar / den) ** 2 * v * v
    total = e2.mean(-1, keepdims=True)
    return np.asarray(e2 / total, float) if (total > 0).all() else None


def decision_uncertainty(judge_long: pd.DataFrame, bar: float) -> dict[str, float]:
    """How much a rating of each sample would narrow the trust decisions on its dimensions: per dimension, the
    standard deviation the sample's rating adds to quadratic kappa's estimator (``sequential.ppi_kappa_bounds``)
    at kappa = ``bar``, predicted from the judge's own distribution,

        e_i² = L_i² v_i + 2 (bar / D)² v_i²,  L_i = (2 / D) ((j_i - m_j) - bar (h_i - m_j)),

    ``j`` the judge's score, ``h`` and ``v`` its prediction of people's score and that prediction's variance, ``m_j``
    and ``D = mean(j²) + mean(h² + v) - 2 m_j mean(h)`` over the checkpoint's samples (kappa's gradient in the
    people's moments, times the spread of the people's score, and its second-order term). Each dimension's e²
    is divided by its mean, averaged over dimensions, and its square root returned: Neyman's allocation for the
    open decisions, the sampling rate that makes their variance smallest for the ratings spent. Samples where
    the judge's spread is unknown are left out (they get the average chance)."""
    pred = panel_predictions(judge_long).dropna(subset=["var"])
    parts = []
    for _, d in pred.groupby("dimension", sort=True):
        e2 = kappa_variance_shares(d.score.to_numpy(float), d["mean"].to_numpy(float), d["var"].to_numpy(float), bar)
        if e2 is not None:
            parts.append(pd.Series(e2, index=d.sample_id.to_numpy()))
    if not parts:
        return {}
    per_sample = pd.concat(parts).groupby(level=0).mean()
    return {str(k): float(math.sqrt(v)) for k, v in per_sample.items()}
