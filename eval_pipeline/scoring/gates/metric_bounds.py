"""``metric_min`` and ``metric_max``: the mean of a score (often a metric) at least / at most the threshold."""

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateInputs, GateResult, GateSpec, too_few, values_of


class MetricBoundSpec(GateSpec):
    score: str


def _bound(g: MetricBoundSpec, scores: pd.DataFrame, at_least: bool) -> GateResult:
    vals = values_of(scores, g.score)
    if len(vals) < g.min_samples:
        return too_few(g, len(vals), f"samples with a {g.score}", len(scores))
    mean = float(vals.mean())
    ok = mean >= g.threshold if at_least else mean <= g.threshold
    note = ""
    if not at_least and g.threshold == 0:
        note = f"; {int((vals > 0).sum())} of {len(vals)} samples violate it"
    return GateResult(
        g.name,
        g.kind,
        mean,
        g.threshold,
        ok,
        len(vals),
        f"mean {g.score} {mean:.3f} (need {'>=' if at_least else '<='} {g.threshold:g}){note}",
    )


@gate("metric_min", spec=MetricBoundSpec)
def metric_min(g: MetricBoundSpec, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs) -> GateResult:
    return _bound(g, scores, at_least=True)


@gate("metric_max", spec=MetricBoundSpec)
def metric_max(g: MetricBoundSpec, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs) -> GateResult:
    return _bound(g, scores, at_least=False)
