"""The judge's own noise: a seeded, stratified subset of a checkpoint scored again.

LLM judges are not repeatable at non-zero temperature. The rubric's ``repeat: {samples, times}`` picks
``samples`` samples (stratified by the worklist strata, seeded by the rubric and the checkpoint) and has the
panel score each ``times`` times in all: the main run's answer (from the cache) and ``times - 1`` repeats,
each under its own cache key. Per dimension: Krippendorff's alpha (interval) with the repeats as raters,
the mean within-sample standard deviation, and the share of samples whose score changed. The comparison
against the parent uses the within-sample SD to say whether a change exceeds what repeat noise alone makes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from eval_pipeline.agreement import stats as st
from eval_pipeline.core.config import RepeatSpec, RubricConfig
from eval_pipeline.core.contracts import BATCH_PENDING, PANEL, REPEATABILITY_COLUMNS
from eval_pipeline.core.resampling import seed_of
from eval_pipeline.core.types import Record, Row


def repeated_scores(rubric: RubricConfig) -> list[str]:
    """What the repeats compare: every judged dimension and every questionnaire metric (the panel's rows)."""
    q = rubric.questionnaire
    return [d.key for d in rubric.judged_dimensions] + ([m.key for m in q.metrics] if q else [])


def pick_subset(rubric: RubricConfig, ckpt: str, records: list[Record], spec: RepeatSpec) -> list[Row]:
    """``spec.samples`` records, spread over the strata in proportion (at least one from each while there is
    room), the same ones on every run for the same rubric, checkpoint and seed."""
    if len(records) <= spec.samples:
        return list(records)
    rng = np.random.default_rng(spec.seed + seed_of(rubric.name, ckpt))
    strata = [f for f in rubric.worklists.strata if records and f in records[0]]
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for rec in sorted(records, key=lambda r: str(r["sample_id"])):
        groups.setdefault(tuple(str(rec.get(f)) for f in strata), []).append(rec)
    keys = sorted(groups)
    quota = {k: max(1, round(spec.samples * len(groups[k]) / len(records))) for k in keys}
    while sum(quota.values()) > spec.samples:  # rounding up the small strata overshot: trim the largest
        biggest = max(keys, key=lambda k: quota[k])
        quota[biggest] -= 1
    picked: list[Row] = []
    for k in keys:
        order = rng.permutation(len(groups[k]))[: quota[k]]
        picked += [groups[k][i] for i in sorted(order)]
    rest = [r for r in records if r not in picked]
    if len(picked) < spec.samples and rest:
        extra = rng.permutation(len(rest))[: spec.samples - len(picked)]
        picked += [rest[i] for i in sorted(extra)]
    return picked


def _spread(
    sample: np.ndarray, scoring: np.ndarray, values: np.ndarray, times: int
) -> tuple[int, int, float, float, float]:
    """Samples compared, scores missing, alpha (interval) across the scorings, mean within-sample SD, share of
    samples whose score changed, from one dimension's panel scores: each with its sample's code (in sample id
    order), the scoring it comes from (0..times-1) and its value (NaN: missing)."""
    kept, row = np.unique(sample, return_inverse=True)
    wide = np.full((len(kept), times), np.nan)  # samples x scorings, NaN where a scoring has no score
    wide[row, scoring] = values
    missing = int(np.isnan(wide).sum())
    data = wide[~np.isnan(wide).any(axis=1)]  # samples x repeats
    n = len(data)
    sd = float(np.mean(np.std(data, axis=1, ddof=1))) if n else float("nan")
    changed = float(np.mean(np.ptp(data, axis=1) > 0)) if n else float("nan")
    alpha = float("nan")
    if n >= 2:
        # alpha is undefined when no score varies at all: a judge that never changes is perfectly repeatable
        alpha = 1.0 if np.all(data == data[0, 0]) or changed == 0 else st.krippendorff_alpha(data.T, "interval")
    return n, missing, alpha, sd, changed


def _waiting(panel: pd.DataFrame) -> np.ndarray:
    """Which of a scoring's panel rows have no score because a judge batch has not answered yet."""
    if "reason" not in panel:
        return np.zeros(len(panel), bool)
    no_score = panel["score"].isna().to_numpy()
    said = panel["reason"].fillna("").astype(str).str.contains(BATCH_PENDING, regex=False).to_numpy()
    return np.asarray(no_score & said, bool)


def score_source(panels: list[pd.DataFrame], dim: str) -> str:
    """Which scores the scorings of ``dim`` compared: ``expected`` (every score an expected value read from token
    probabilities), ``chosen`` (every score the one the judge wrote) or ``mixed``; from each row's own
    ``score_source``."""
    sources: set[str] = set()
    for p in panels:
        rows = p[(p["dimension"] == dim) & p["score"].notna()]
        if "score_source" in rows:
            sources |= set(rows["score_source"].dropna().astype(str))
        else:  # frames without the column (written before it): a score equal to its expected value was read
            read = rows["expected_score"].notna() & (rows["score"] == rows["expected_score"])
            sources |= {"expected" if r else "chosen" for r in read}
    if sources <= {"chosen"}:
        return "chosen"
    return "expected" if sources == {"expected"} else "mixed"


def repeatability(ckpt: str, repeats: list[pd.DataFrame], dimensions: list[str]) -> pd.DataFrame:
    """``repeats``: one judge_scores frame per scoring of the subset; the panel's rows are compared, on the score
    that feeds the results and on the score the judge wrote (they differ when scores are expected values read
    from token probabilities). Samples in sample id order, whatever order the rows come in. A score still waiting
    on a judge batch is ``pending``, not ``missing``."""
    panels = [r[r.judge == PANEL] for r in repeats]  # each scoring's panel rows
    ids = pd.concat([p["sample_id"] for p in panels], ignore_index=True)
    sample = pd.factorize(ids, sort=True)[0]
    scoring = np.repeat(np.arange(len(panels)), [len(p) for p in panels])
    dims = np.concatenate([p["dimension"].to_numpy(object) for p in panels]) if panels else np.array([], object)
    score = np.concatenate([p["score"].to_numpy(float) for p in panels]) if panels else np.array([])
    chosen = np.concatenate([p["chosen_score"].to_numpy(float) for p in panels]) if panels else np.array([])
    waiting = np.concatenate([_waiting(p) for p in panels]) if panels else np.array([], bool)
    rows = []
    for dim in dimensions:
        at = dims == dim
        held = int(waiting[at].sum())  # of the missing scores, those a judge batch has not answered yet
        n, missing, alpha, sd, changed = _spread(sample[at], scoring[at], score[at], len(repeats))
        _, _, alpha_w, sd_w, changed_w = _spread(sample[at], scoring[at], chosen[at], len(repeats))
        rows.append(
            dict(
                checkpoint_id=ckpt,
                dimension=dim,
                n_samples=n,
                times=len(repeats),
                score_source=score_source(panels, dim),
                alpha_interval=alpha,
                mean_within_sd=sd,
                share_changed=changed,
                alpha_chosen=alpha_w,
                mean_within_sd_chosen=sd_w,
                share_changed_chosen=changed_w,
                missing=missing - held,
                pending=held,
            )
        )
    floats = ["alpha_interval", "mean_within_sd", "share_changed", "alpha_chosen", "mean_within_sd_chosen"]
    return pd.DataFrame(rows, columns=REPEATABILITY_COLUMNS).astype(
        {c: "float64" for c in [*floats, "share_changed_chosen"]}
    )


def noise_band(within_sd: float, n_child: int, n_parent: int) -> float:
    """The 95 % band of a change between two checkpoint means that judge noise alone makes: each sample's
    score varies with SD ``within_sd`` from one scoring to the next, independently across samples."""
    if not np.isfinite(within_sd) or n_child < 1 or n_parent < 1:
        return float("nan")
    return float(1.96 * within_sd * np.sqrt(1 / n_child + 1 / n_parent))
