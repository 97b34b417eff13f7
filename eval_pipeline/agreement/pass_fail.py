"""The answer-quality protocol's pass/fail agreement: two raters' scores turned into pass or fail at the rubric's
threshold (after its derived scores), then Cohen's kappa on the two labels, per rater pair, and beside it Gwet's AC1
(prevalence-robust) with each rater's PASS share."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pandas as pd

from eval_pipeline.agreement import stats as st
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import ALL_HUMANS, between, rater_pair
from eval_pipeline.core.derived import per_rater
from eval_pipeline.core.resampling import items_seed
from eval_pipeline.core.types import Row


def pass_fail_pairs(rubric: RubricConfig, per: pd.DataFrame) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    """Each pair of raters' PASS (1) / FAIL (0) labels on the items both rated, from ``per`` (items x raters: the
    pass/fail score of each, ``core.derived.per_rater``)."""
    pf = rubric.human_ratings.pass_fail
    assert pf is not None
    for e1, e2 in itertools.combinations(list(per.columns), 2):
        pair = per[[e1, e2]].dropna()
        if pair.empty:
            continue
        a = (pair[e1].round(9) >= pf.threshold).astype(float).to_numpy()
        b = (pair[e2].round(9) >= pf.threshold).astype(float).to_numpy()
        yield str(e1), str(e2), a, b


def pass_fail_rows(rubric: RubricConfig, ckpt: str, ratings: pd.DataFrame, people: set[str]) -> list[Row]:
    """Pass/fail agreement per pair of raters (or one row for a panel past ``pairwise_up_to``); ``people``: the
    raters who are people (``agreement.between``)."""
    pf = rubric.human_ratings.pass_fail
    if pf is None or ratings.empty:
        return []
    per = per_rater(rubric, ratings, pf.score, ["checkpoint_id", "sample_id"])
    if per.shape[1] > rubric.human_ratings.pairwise_up_to:
        return [_pooled_row(rubric, ckpt, per, people)]
    rows = []
    for e1, e2, a, b in pass_fail_pairs(rubric, per):
        v = st.cohen_kappa(a, b, [0.0, 1.0])
        lo, hi = st.bootstrap(
            lambda x, y, idx: st.cohen_kappa_resamples(x, y, [0.0, 1.0], None, idx),
            [a, b],
            items_seed(ratings, rubric.name, "pf"),
        )
        both = np.concatenate([a, b])
        base = dict(
            checkpoint_id=ckpt,
            dimension=pf.score,
            raters=rater_pair(e1, e2),
            n_items=len(a),
            n_raters=2,
            between=between((e1, e2), people),
            prevalence=st.prevalence(both),
            ceiling_share=float(both.mean()),
        )
        ac1_label = f"Gwet's AC1; {e1} passes {a.mean():.0%}, {e2} {b.mean():.0%}; agree on {(a == b).mean():.0%}"
        rows.append(
            {**base, "statistic": f"pass_fail_ac1 (>= {pf.threshold:g})", "value": st.gwet_ac1(a, b, [0.0, 1.0]),
             "ci_low": None, "ci_high": None, "label": ac1_label}
        )  # fmt: skip
        rows.append(
            {**base, "statistic": f"pass_fail_kappa (>= {pf.threshold:g})", "value": v, "ci_low": lo,
             "ci_high": hi, "label": st.kappa_band(v)}
        )  # fmt: skip
    return rows


def _pooled_row(rubric: RubricConfig, ckpt: str, per: pd.DataFrame, people: set[str]) -> Row:
    """Past ``pairwise_up_to`` raters, one row for the panel instead of a kappa per pair: Krippendorff's alpha
    (nominal) on the pass/fail labels, missing ratings allowed."""
    pf = rubric.human_ratings.pass_fail
    assert pf is not None
    values = per.to_numpy(float)
    labels = np.where(np.isnan(values), np.nan, (np.round(values, 9) >= pf.threshold).astype(float))
    seen = labels[~np.isnan(labels)]
    v = st.krippendorff_alpha(np.ascontiguousarray(labels.T), "nominal", [0.0, 1.0])
    return dict(
        checkpoint_id=ckpt,
        dimension=pf.score,
        statistic=f"pass_fail_alpha (>= {pf.threshold:g})",
        raters=ALL_HUMANS,
        n_items=int(((~np.isnan(labels)).sum(axis=1) >= 2).sum()),
        n_raters=per.shape[1],
        between=between((str(c) for c in per.columns), people),
        value=v,
        ci_low=None,
        ci_high=None,
        prevalence=st.prevalence(seen) if len(seen) else None,
        ceiling_share=float(seen.mean()) if len(seen) else None,
        label=st.kappa_band(v) if v == v else None,
    )
