"""Which checkpoint is best, with stated confidence: simultaneous confidence sets for the ranks of every checkpoint
judged by the same judge, and the ties that follow (#74).

The construction (Klein, Wright & Wieczorek 2020, "A joint confidence region for an overall ranking of
populations", JRSS C; the "all pairs" form of Al Mohamad, Goeman & van Zwet 2022):

* Each checkpoint's mean headline ``m_i`` with the covariance of the means: where two checkpoints share samples
  (the same prompts, paired), ``Cov(m_i, m_j) = n_ij c_ij / (n_i n_j)``, ``c_ij`` the covariance of their scores
  over the ``n_ij`` shared samples; apart, 0 (``judged_moments``). For human-calibrated means (PPI++,
  ``agreement.ppi``), each mean's own standard error and no covariance (``calibrated_moments``): conservative
  where the checkpoints share prompts.
* Every pair's difference ``d_ij = m_i - m_j`` gets a simultaneous interval ``d_ij -+ c se_ij``, ``c`` the
  ``1 - alpha`` quantile of ``max_{i<j} |Z_i - Z_j| / se_ij`` for ``Z ~ N(0, Sigma)`` (``max_t_quantile``: the
  single-step max-t of Hothorn, Bretz & Westfall 2008, by a seeded simulation of the estimated joint normal; a
  covariance estimated from partial overlaps is first made positive semi-definite). It is never larger than
  Bonferroni's ``z(1 - alpha / (K (K - 1)))``, which takes the pairs as unrelated.
* Checkpoint i's rank set is ``[1 + #{j better than i}, K - #{j worse than i}]``, "better" meaning the interval of
  ``d`` lies wholly on the better side of 0 (rank 1 the best, in the score's direction). When every interval covers
  its true difference — probability at least ``1 - alpha``, asymptotically — every checkpoint's true rank lies in
  its set, for all of them at once (with true ties: from the best to the worst rank the tie could take). Those
  whose interval against i holds 0 are ``tied_with`` i.

Where it is wide: with many checkpoints (c grows slowly with K: 2.34 at K = 3, 2.95 at 7, 3.53 at 20, for
independent means, against Bonferroni's 2.39, 3.04, 3.65), few samples, or differences small beside the scores'
spread. Checked by bench/bench_ranks.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.distributions import norm_ppf
from eval_pipeline.storage.warehouse import Warehouse

ALPHA = 0.05
SIMULATIONS = 20_000
SEED = 20261206
JUDGED, CALIBRATED = "judged", "calibrated"
RANK_COLUMNS = ["checkpoint_id", "mean", "se", "n", "rank_low", "rank_high", "tied_with", "rank_set", "basis"]
# the stored table (``rank_table``): per checkpoint, its rank set among the checkpoints its judge judged
TABLE_COLUMNS = ["checkpoint_id", "score", "judge_identity", "judge_label", "checkpoints_ranked", *RANK_COLUMNS[1:]]
NO_JUDGE = "-"
CHUNK = 2_000  # simulated draws held at once: K = 200 checkpoints' 19,900 pairs stay under 40 M values
# past this many checkpoints the pairs' critical value is Sidak's (valid for any dependence, a hair under
# Bonferroni's) instead of the simulation: at K = 64 the max-t value is within 3 % of it, and the simulation's
# K (K - 1) / 2 pairs a draw would make a landing's ranking cost seconds (K = 200: 3.6 s)
SIMULATED_UP_TO = 64


@dataclass(frozen=True)
class Moments:
    """Checkpoints' means, the covariance of those means and each one's sample count, in ``ids`` order."""

    ids: list[str]
    mean: np.ndarray
    cov: np.ndarray
    n: np.ndarray


def judged_moments(values: pd.DataFrame) -> Moments:
    """The means of ``values`` (columns ``checkpoint_id``, ``sample_id``, ``value``; one row a sample and
    checkpoint, NaN values left out) and their covariance, paired where checkpoints share samples."""
    v = values.dropna(subset=["value"])
    wide = v.pivot_table(index="sample_id", columns="checkpoint_id", values="value", aggfunc="mean")
    ids = [str(c) for c in wide.columns]
    x = wide.to_numpy(float)
    seen = ~np.isnan(x)
    n = seen.sum(0).astype(float)
    mean = np.nanmean(x, axis=0) if len(ids) else np.zeros(0)
    centred = np.where(seen, x - mean, 0.0)
    shared = seen.T.astype(float) @ seen.astype(float)  # n_ij
    # the covariance of two checkpoints' scores over the samples they share (ddof 1), each about its own mean
    with np.errstate(divide="ignore", invalid="ignore"):
        c = (centred.T @ centred) / np.maximum(shared - 1.0, 1.0)
        cov = np.where(shared > 1, shared * c / np.outer(n, n), 0.0)
    return Moments(ids, mean, cov, n)


def calibrated_moments(ids: Sequence[str], mean: Sequence[float], se: Sequence[float], n: Sequence[int]) -> Moments:
    """Means with their own standard errors (PPI++ estimates), taken as uncorrelated."""
    s = np.asarray(se, float)
    return Moments(list(ids), np.asarray(mean, float), np.diag(s * s), np.asarray(n, float))


def _root(cov: np.ndarray) -> np.ndarray:
    """A square root ``R`` (``R @ R.T``) of ``cov`` with negative eigenvalues set to 0 (a covariance estimated
    pairwise need not be one)."""
    w, u = np.linalg.eigh((cov + cov.T) / 2.0)
    return np.asarray(u * np.sqrt(np.maximum(w, 0.0)), float)


def _pair_se(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    i, j = np.triu_indices(len(cov), 1)
    var = cov[i, i] + cov[j, j] - 2.0 * cov[i, j]
    return i, j, np.sqrt(np.maximum(var, 0.0))


def max_t_quantile(
    cov: np.ndarray,
    alpha: float = ALPHA,
    sims: int = SIMULATIONS,
    seed: int = SEED,
    root: np.ndarray | None = None,
) -> float:
    """The ``1 - alpha`` quantile of ``max_{i<j} |Z_i - Z_j| / se_ij``, ``Z ~ N(0, cov)`` (seeded), or past
    ``SIMULATED_UP_TO`` checkpoints Sidak's bound on it. ``root``: ``cov``'s square root when the caller has it."""
    k = len(cov)
    if k < 2:
        return math.nan
    if k > SIMULATED_UP_TO:
        return sidak_quantile(k, alpha)
    root = _root(cov) if root is None else root
    i, j, se = _pair_se(cov)
    keep = se > 0
    if not keep.any():
        return math.nan
    i, j, se = i[keep], j[keep], se[keep]
    rng = np.random.default_rng(seed)
    most = []
    for start in range(0, sims, CHUNK):
        z = rng.standard_normal((min(CHUNK, sims - start), k)) @ root.T
        most.append((np.abs(z[:, i] - z[:, j]) / se).max(axis=1))
    return float(np.quantile(np.concatenate(most), 1.0 - alpha))


def sidak_quantile(k: int, alpha: float = ALPHA) -> float:
    """Sidak's two-sided critical value over the ``k (k - 1) / 2`` pairs (never above Bonferroni's)."""
    pairs = k * (k - 1) / 2
    return norm_ppf(1.0 - (1.0 - (1.0 - alpha) ** (1.0 / pairs)) / 2.0) if k >= 2 else math.nan


def bonferroni_quantile(k: int, alpha: float = ALPHA) -> float:
    """Bonferroni's two-sided critical value over the ``k (k - 1) / 2`` pairs."""
    return norm_ppf(1.0 - alpha / (k * (k - 1))) if k >= 2 else math.nan


def rank_sets(
    m: Moments,
    lower_is_better: bool = False,
    alpha: float = ALPHA,
    basis: str = JUDGED,
    critical: float | None = None,
) -> pd.DataFrame:
    """Every checkpoint's simultaneous rank set (``RANK_COLUMNS``; rank 1 the best). ``critical``: the pairs'
    critical value (default: ``max_t_quantile`` of the moments' covariance)."""
    k = len(m.ids)
    if k == 0:
        return pd.DataFrame(columns=RANK_COLUMNS)
    root = _root(m.cov)
    cov = root @ root.T
    sign = -1.0 if lower_is_better else 1.0
    better = np.zeros((k, k), bool)  # better[i, j]: i is significantly better than j
    if k >= 2:
        c = max_t_quantile(cov, alpha, root=root) if critical is None else critical
        i, j, se = _pair_se(cov)
        d = sign * (m.mean[i] - m.mean[j])
        sure = (se > 0) | (d != 0)  # a difference with no spread at all is certain; none with none is a tie
        better[i, j] = sure & (d > c * se)
        better[j, i] = sure & (-d > c * se)
    low = 1 + better.sum(0)
    high = k - better.sum(1)
    rows = []
    for a, cid in enumerate(m.ids):
        tied = [m.ids[b] for b in range(k) if b != a and not better[a, b] and not better[b, a]]
        rows.append(
            dict(
                checkpoint_id=cid,
                mean=float(m.mean[a]),
                se=float(math.sqrt(max(cov[a, a], 0.0))),
                n=int(m.n[a]),
                rank_low=int(low[a]),
                rank_high=int(high[a]),
                tied_with=", ".join(tied),
                rank_set=describe(int(low[a]), int(high[a]), k, tied),
                basis=basis,
            )
        )
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def describe(low: int, high: int, k: int, tied: Sequence[str]) -> str:
    """The rank set as people read it: "1 of 7", "1–2 of 7, tied with ckpt-0200"."""
    where = f"{low} of {k}" if low == high else f"{low}–{high} of {k}"
    if not tied:
        return where
    shown = ", ".join(tied[:3]) + (f" and {len(tied) - 3} more" if len(tied) > 3 else "")
    return f"{where}, tied with {shown}"


def rank_table(
    reader: Warehouse, rubric: RubricConfig, checkpoints: Sequence[str], score: str | None = None
) -> pd.DataFrame:
    """The rank sets of ``score`` (default: the rubric's headline) over ``checkpoints`` (``TABLE_COLUMNS``), one
    ranking per judge identity: checkpoints judged by different judges are never ranked together.
    Human-calibrated (``basis`` calibrated) where the score is a dimension people rate and people rated every
    checkpoint of the group (PPI++ means from ``calibrated_means``), else on the per-sample scores, paired over the
    samples checkpoints share."""
    score = score or rubric.headline
    where = {"checkpoint_id": tuple(sorted(checkpoints))}
    if not checkpoints or score not in reader.columns(rubric.name, Table.SCORES):
        return pd.DataFrame(columns=TABLE_COLUMNS)
    values = reader.read(rubric.name, Table.SCORES, columns=["checkpoint_id", "sample_id", score], where=where)
    values = values.rename(columns={score: "value"})
    who = {str(c): (NO_JUDGE, "") for c in checkpoints}
    if reader.table_exists(rubric.name, Table.JUDGE_IDENTITY):
        ident = reader.read(rubric.name, Table.JUDGE_IDENTITY, columns=["checkpoint_id", "judge_identity", "label"])
        for c, i, label in ident.itertuples(index=False):
            if str(c) in who and isinstance(i, str) and i:
                who[str(c)] = (i, str(label or ""))
    calibrated = _calibrated(reader, rubric, checkpoints, score)
    lower = score in rubric.lower_is_better
    parts = []
    for identity in sorted({i for i, _ in who.values()}):
        group = sorted(c for c, (i, _) in who.items() if i == identity)
        cal = calibrated.reindex(group)
        if len(cal) and cal.notna().all().all():
            m = calibrated_moments(group, cal["mean"], cal["se"], cal["n"])
            got = rank_sets(m, lower, basis=CALIBRATED)
        else:
            got = rank_sets(judged_moments(values[values.checkpoint_id.isin(group)]), lower)
        got.insert(1, "score", score)
        got.insert(2, "judge_identity", identity)
        got.insert(3, "judge_label", who[group[0]][1])
        got.insert(4, "checkpoints_ranked", len(got))
        parts.append(got)
    return pd.concat(parts, ignore_index=True)[TABLE_COLUMNS] if parts else pd.DataFrame(columns=TABLE_COLUMNS)


def _calibrated(reader: Warehouse, rubric: RubricConfig, checkpoints: Sequence[str], score: str) -> pd.DataFrame:
    """Per checkpoint, the PPI++ mean of the dimension ``score``, its standard error (from its interval) and the
    samples it spans; empty where ``score`` is not a dimension people rate."""
    empty = pd.DataFrame(columns=["mean", "se", "n"], dtype=float)
    if score not in rubric.rating_scales or not reader.table_exists(rubric.name, Table.CALIBRATED_MEANS):
        return empty
    cols = ["checkpoint_id", "calibrated_mean", "calibrated_ci_low", "calibrated_ci_high", "n_rated", "n_unrated"]
    where = {"checkpoint_id": tuple(sorted(checkpoints)), "dimension": score}
    rows = reader.read(rubric.name, Table.CALIBRATED_MEANS, columns=cols, where=where)
    rows = rows[rows.n_rated >= 2].set_index("checkpoint_id")
    half = (rows.calibrated_ci_high - rows.calibrated_ci_low) / 2.0
    return pd.DataFrame(
        {"mean": rows.calibrated_mean, "se": half / norm_ppf(1 - ALPHA / 2), "n": rows.n_rated + rows.n_unrated}
    )
