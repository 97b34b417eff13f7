"""``regression``: no score dropped significantly against the parent (scoring.comparison: a paired test per score and
a human-calibrated change per judged dimension people rated in both, Holm-corrected within the rubric; a judged
drop on a dimension the judge is not trusted on does not count). ``params.ignore``: scores it does not gate on.
Pending when the parent was judged by another judge; not applicable without a parent."""

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.scoring.comparison import evaluate_regression
from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateInputs, GateResult, RegressionSpec, fails_closed


@gate("regression", spec=RegressionSpec, needs=("comparison",))
def regression(g: RegressionSpec, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs) -> GateResult:
    comparison = inputs.table("comparison")
    if not inputs.lineage_known:
        return fails_closed(g, 0, "no comparison available")
    return evaluate_regression(g, comparison, inputs.parent, None)
