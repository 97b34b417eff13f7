"""``min_samples``: at least ``threshold`` valid samples."""

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateInputs, GateResult, GateSpec


@gate("min_samples")
def min_samples(g: GateSpec, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs) -> GateResult:
    n = len(scores)
    return GateResult(
        g.name, g.kind, float(n), g.threshold, n >= g.threshold, n, f"{n} valid samples (need >= {g.threshold:g})"
    )
