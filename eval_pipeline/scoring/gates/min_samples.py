"""``min_samples``: at least ``threshold`` valid samples."""

from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateResult


@gate("min_samples")
def min_samples(g, rubric, scores, inputs) -> GateResult:
    n = len(scores)
    return GateResult(
        g.name, g.kind, float(n), g.threshold, n >= g.threshold, n, f"{n} valid samples (need >= {g.threshold:g})"
    )
