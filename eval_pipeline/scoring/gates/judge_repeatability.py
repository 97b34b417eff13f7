"""``judge_repeatability``: the judge agrees with itself. Krippendorff's alpha (interval) across the repeat
scorings of the rubric's ``repeat:`` subset is at least ``threshold`` on every judged dimension (or the listed
``dimensions``), each on at least ``min_samples`` samples scored every time; without repeats it fails closed; while
repeat scores wait on a judge batch it is pending."""

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import WAITING_ON_BATCH
from eval_pipeline.judge.repeat import repeated_scores
from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateInputs, GateResult, GateSpec, fails_closed, pending


@gate("judge_repeatability", needs=("judge_repeatability",), check_target="judge_scores")
def judge_repeatability(g: GateSpec, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs) -> GateResult:
    table = inputs.table("judge_repeatability")
    wanted = g.dimensions or repeated_scores(rubric)
    rows = table[table.dimension.isin(wanted)] if table is not None else None
    if rows is None or rows.empty:
        why = "the rubric asks for no repeats (repeat:)" if rubric.repeat is None else "no repeat scores"
        return fails_closed(g, 0, why)
    n = int(rows.n_samples.min())
    waiting = int(rows["pending"].fillna(0).sum()) if "pending" in rows else 0
    if waiting:  # the repeats are on their way (a judge batch still working): not a failure of the judge
        return pending(g, n, f"{waiting} repeat scores {WAITING_ON_BATCH}")
    if n < g.min_samples or rows.alpha_interval.isna().any():
        return fails_closed(g, n, f"{n} samples scored every time (need {g.min_samples}) or an alpha is undefined")
    worst = rows.sort_values("alpha_interval").iloc[0]
    parts = "; ".join(
        f"{r.dimension} alpha {r.alpha_interval:.2f}, {r.share_changed:.0%} changed" for r in rows.itertuples()
    )
    passed = bool(worst.alpha_interval >= g.threshold)
    verdict = "passes" if passed else f"fails on {worst.dimension}"
    return GateResult(g.name, g.kind, float(worst.alpha_interval), g.threshold, passed, n, f"{verdict}; {parts}")
