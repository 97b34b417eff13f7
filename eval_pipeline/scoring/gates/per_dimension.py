"""``dimension_mean`` and ``dimension_pass_rate``: a statistic per judged dimension, each at least the threshold."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateInputs, GateResult, GateSpec, too_few, values_of


def per_dimension(
    g: GateSpec, dims: list[str], scores: pd.DataFrame, stat: Callable[[np.ndarray, str], float], label: str
) -> GateResult:
    parts, fails, values, ns = [], [], [], []
    for k in dims:
        vals = values_of(scores, k)
        ns.append(len(vals))
        if len(vals) < g.min_samples:
            return too_few(g, len(vals), f"scored samples on '{k}'", len(scores))
        v = stat(vals, k)
        values.append(v)
        parts.append(f"{k} {v:.3f}")
        if v < g.threshold:
            fails.append(k)
    value = float(min(values)) if values else None
    reason = f"{label}: " + ", ".join(parts)
    reason = (f"below {g.threshold:g} on {', '.join(fails)}; " if fails else f"all >= {g.threshold:g}; ") + reason
    return GateResult(g.name, g.kind, value, g.threshold, not fails and bool(values), min(ns) if ns else 0, reason)


@gate("dimension_mean")
def dimension_mean(g: GateSpec, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs) -> GateResult:
    dims = g.dimensions or [d.key for d in rubric.judged_dimensions]
    return per_dimension(g, dims, scores, lambda v, _k: float(v.mean()), "means")


@gate("dimension_pass_rate")
def dimension_pass_rate(g: GateSpec, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs) -> GateResult:
    pass_thr = {d.key: d.pass_threshold for d in rubric.dimensions}
    dims = g.dimensions or [d.key for d in rubric.judged_dimensions if pass_thr.get(d.key) is not None]
    return per_dimension(
        g, dims, scores, lambda v, k: float((v >= pass_thr[k]).mean()), "share reaching each dimension's pass threshold"
    )
