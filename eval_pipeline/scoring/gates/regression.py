"""``regression``: no guarded score's paired-bootstrap interval of the change against the parent lies wholly
on the worse side."""

from eval_pipeline.scoring.comparison import evaluate_regression
from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateResult


@gate("regression", needs=("comparison",))
def regression(g, rubric, scores, inputs) -> GateResult:
    comparison = inputs.table("comparison")
    if not inputs.lineage_known:
        return GateResult(g.name, g.kind, None, g.threshold, False, 0, "fails closed: no comparison available")
    return evaluate_regression(g, comparison, inputs.parent, None)
