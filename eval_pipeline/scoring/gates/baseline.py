"""``no_regression_vs_baseline``: no score dropped against a pinned baseline (``params.baseline``: the released
checkpoint), by the same paired test, Holm correction and practical margins as the parent comparison
(scoring.comparison). It catches a slow decline whose every step was too small to see against its parent. Pending
when the baseline has no scores yet or was judged by another judge (numbers from different judges are never
compared); not applicable on the baseline itself."""

import pandas as pd
from pydantic import Field

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.scoring.comparison import compare, evaluate_regression
from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateInputs, GateResult, RegressionParams, RegressionSpec, pending


class BaselineParams(RegressionParams):
    baseline: str = Field(description="The released checkpoint every checkpoint is also tested against.")


class BaselineSpec(RegressionSpec):
    params: BaselineParams


def _judge(rows: pd.DataFrame | None) -> str | None:
    if rows is None or rows.empty or "judge_identity" not in rows.columns:
        return None
    value = rows.judge_identity.iloc[0]
    return str(value) if isinstance(value, str) and value else None


@gate(
    "no_regression_vs_baseline",
    spec=BaselineSpec,
    needs=(Table.SCORES,),
    checkpoints=lambda g: [g.params.baseline],
)
def no_regression_vs_baseline(
    g: BaselineSpec, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs
) -> GateResult:
    base = g.params.baseline
    if inputs.checkpoint == base:
        return GateResult(g.name, g.kind, 0.0, g.threshold, True, 0, f"not applicable: {base} is the baseline")
    prev = inputs.other(Table.SCORES, base)
    if prev is None or prev.empty:
        return pending(g, 0, f"baseline {base} has no scores yet: evaluate it first")
    judged = bool(rubric.judged_dimensions or rubric.questionnaire)
    if judged:
        mine, theirs = _judge(inputs.table(Table.JUDGE_IDENTITY)), _judge(inputs.other(Table.JUDGE_IDENTITY, base))
        if mine != theirs:
            return pending(
                g,
                0,
                f"not comparable: baseline {base} was judged by another judge; re-judge it with the current judge: "
                f"eval-pipeline run --checkpoint {base} --rubric {rubric.name}",
            )
    df = compare(rubric, inputs.checkpoint or "", base, scores, prev)
    return evaluate_regression(g, df, base, None, label="baseline ")
