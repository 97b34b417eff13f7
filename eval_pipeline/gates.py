"""Threshold gates: evaluated per checkpoint from the scores, all thresholds from the rubric YAML.

Each gate yields (value, threshold, passed, reason). A gate with too little data
fails closed and says why; missing scores count as missing (they shrink n), never
as passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from eval_pipeline.config import Gate, RubricConfig

GATE_COLUMNS = ["checkpoint_id", "gate", "kind", "value", "threshold", "passed", "n", "reason", "rubric_version"]


@dataclass
class GateResult:
    gate: str
    kind: str
    value: float | None
    threshold: float
    passed: bool
    n: int
    reason: str


def _values(scores: pd.DataFrame, col: str) -> np.ndarray:
    if col not in scores.columns:
        return np.array([], dtype=float)
    v = pd.to_numeric(scores[col], errors="coerce").to_numpy(dtype=float)
    return v[~np.isnan(v)]


def _too_few(g: Gate, n: int, what: str) -> GateResult:
    return GateResult(g.name, g.kind, None, g.threshold, False, n,
                      f"fails closed: {n} {what}, fewer than the {g.min_samples} required")


def _per_dimension(g: Gate, rubric: RubricConfig, scores: pd.DataFrame, stat: Callable[[np.ndarray, str], float | None],
                   label: str, thresholds: Callable[[str], float | None] = lambda _k: None) -> GateResult:
    dims = g.dimensions or [d.key for d in rubric.judged_dimensions]
    parts, fails, values, ns = [], [], [], []
    for k in dims:
        vals = _values(scores, k)
        ns.append(len(vals))
        if len(vals) < g.min_samples:
            return _too_few(g, len(vals), f"scored samples on '{k}'")
        v = stat(vals, k)
        values.append(v)
        parts.append(f"{k} {v:.3f}")
        if v < g.threshold:
            fails.append(k)
    value = float(min(values)) if values else None
    reason = f"{label}: " + ", ".join(parts)
    reason = (f"below {g.threshold:g} on {', '.join(fails)}; " if fails else f"all >= {g.threshold:g}; ") + reason
    return GateResult(g.name, g.kind, value, g.threshold, not fails and bool(values), min(ns) if ns else 0, reason)


def evaluate_gate(g: Gate, rubric: RubricConfig, scores: pd.DataFrame, extra: dict | None = None) -> GateResult:
    n_rows = len(scores)
    if g.kind == "min_samples":
        return GateResult(g.name, g.kind, float(n_rows), g.threshold, n_rows >= g.threshold, n_rows,
                          f"{n_rows} valid samples (need >= {g.threshold:g})")
    if g.kind == "dimension_mean":
        return _per_dimension(g, rubric, scores, lambda v, _k: float(v.mean()), "means")
    if g.kind == "dimension_pass_rate":
        pass_thr = {d.key: d.pass_threshold for d in rubric.dimensions}
        dims = g.dimensions or [d.key for d in rubric.judged_dimensions if pass_thr.get(d.key) is not None]
        g2 = g.model_copy(update={"dimensions": dims})
        return _per_dimension(g2, rubric, scores, lambda v, k: float((v >= pass_thr[k]).mean()),
                              "share reaching each dimension's pass threshold")
    if g.kind == "score_share":
        col = scores[g.score] if g.score in scores.columns else pd.Series(dtype=object)
        known = col.dropna()
        if len(known) < g.min_samples:
            return _too_few(g, len(known), f"samples with a {g.score}")
        share = float(known.isin(g.values or []).mean())
        return GateResult(g.name, g.kind, share, g.threshold, share >= g.threshold, len(known),
                          f"{share:.1%} of {len(known)} samples have {g.score} in {g.values} "
                          f"({int(col.isna().sum())} missing, not counted)")
    if g.kind in ("metric_min", "metric_max"):
        vals = _values(scores, g.score or "")
        if len(vals) < g.min_samples:
            return _too_few(g, len(vals), f"samples with a {g.score}")
        mean = float(vals.mean())
        ok = mean >= g.threshold if g.kind == "metric_min" else mean <= g.threshold
        cmp = ">=" if g.kind == "metric_min" else "<="
        extra_note = ""
        if g.kind == "metric_max" and g.threshold == 0:
            extra_note = f"; {int((vals > 0).sum())} of {len(vals)} samples violate it"
        return GateResult(g.name, g.kind, mean, g.threshold, ok, len(vals),
                          f"mean {g.score} {mean:.3f} (need {cmp} {g.threshold:g}){extra_note}")
    if g.kind == "judge_reliability":
        fn = (extra or {}).get("judge_reliability")
        if fn is None:
            return GateResult(g.name, g.kind, None, g.threshold, False, 0,
                              "fails closed: no judge-human agreement available for this checkpoint")
        return fn(g)
    if g.kind == "regression":
        fn = (extra or {}).get("regression")
        if fn is None:
            return GateResult(g.name, g.kind, None, g.threshold, False, 0, "fails closed: no comparison available")
        return fn(g)
    raise ValueError(f"unknown gate kind {g.kind!r}")


def evaluate_gates(rubric: RubricConfig, checkpoint_id: str, scores: pd.DataFrame, extra: dict | None = None) -> pd.DataFrame:
    results = []
    for g in rubric.gates:
        results.append(evaluate_gate(g, rubric, scores, extra))
        per_dim = (extra or {}).get("judge_reliability_dims") if g.kind == "judge_reliability" else None
        if per_dim is not None:
            results.extend(per_dim(g))
    return pd.DataFrame(
        [dict(checkpoint_id=checkpoint_id, gate=r.gate, kind=r.kind, value=r.value, threshold=r.threshold,
              passed=bool(r.passed), n=int(r.n), reason=r.reason, rubric_version=rubric.version) for r in results],
        columns=GATE_COLUMNS,
    ).astype({"value": "float64", "threshold": "float64", "passed": "bool", "n": "int64"})
