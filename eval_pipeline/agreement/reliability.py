"""The judge-reliability gate: nobody should trust a judge that has not earned it.

Per judged dimension: judge-human quadratic kappa >= threshold and Spearman >=
min_spearman on at least `min_samples` human-rated samples of the checkpoint; and
the judge re-scores the rubric document's own worked examples within
`example_tolerance` of their stated scores. Too few ratings fail closed.
"""

from __future__ import annotations

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import CALIBRATION_COLUMNS, JUDGE_VS_HUMAN_MEAN, PANEL
from eval_pipeline.scoring.gates.base import GateResult, GateSpec


def calibration_rows(rubric: RubricConfig, ckpt: str, judge_long: pd.DataFrame, tolerance: float = 1.0) -> pd.DataFrame:
    panel = judge_long[judge_long.judge == PANEL].set_index(["sample_id", "dimension"])
    rows = []
    for ex in rubric.examples:
        for dim, stated in ex.scores.items():
            got = panel["score"].get((ex.id, dim))
            reason = panel["reason"].get((ex.id, dim)) if got is None or pd.isna(got) else None
            judged = None if got is None or pd.isna(got) else float(got)
            diff = None if judged is None else judged - stated
            rows.append(
                dict(
                    checkpoint_id=ckpt,
                    example_id=ex.id,
                    dimension=dim,
                    stated=float(stated),
                    judged=judged,
                    diff=diff,
                    within_tolerance=diff is not None and abs(diff) <= tolerance,
                    judge=str(panel["judge_kind"].iloc[0]) if len(panel) else None,
                    reason=reason,
                )
            )
    return pd.DataFrame(rows, columns=CALIBRATION_COLUMNS).astype(
        {"stated": "float64", "judged": "float64", "diff": "float64"}
    )


def dimension_results(
    g: GateSpec, rubric: RubricConfig, agreement: pd.DataFrame, calibration: pd.DataFrame | None
) -> list[GateResult]:
    """The same gate per judged dimension (named `<gate>_<dimension>`), so each shows on its own in the UI."""
    out = []
    for dim in rubric.rating_scales:
        sub_cal = calibration[calibration.dimension == dim] if calibration is not None and len(calibration) else None
        one = _evaluate(g, rubric, agreement, sub_cal, [dim])
        out.append(GateResult(f"{g.name}_{dim}", g.kind, one.value, one.threshold, one.passed, one.n, one.reason))
    return out


def evaluate_judge_reliability(
    g: GateSpec, rubric: RubricConfig, agreement: pd.DataFrame, calibration: pd.DataFrame | None
) -> GateResult:
    return _evaluate(g, rubric, agreement, calibration, list(rubric.rating_scales))


def _evaluate(
    g: GateSpec, rubric: RubricConfig, agreement: pd.DataFrame, calibration: pd.DataFrame | None, dims: list[str]
) -> GateResult:
    min_rho = float(g.params.get("min_spearman", 0.5))
    parts, fails, kappas = [], [], []
    n_min = None
    for dim in dims:
        rows = agreement[(agreement.dimension == dim) & (agreement.raters == JUDGE_VS_HUMAN_MEAN)]
        kq = rows[rows.statistic == "cohen_kappa_quadratic"]
        rho = rows[rows.statistic == "spearman"]
        n = int(kq.n_items.iloc[0]) if len(kq) else 0
        n_min = n if n_min is None else min(n_min, n)
        if n < g.min_samples:
            fails.append(dim)
            parts.append(f"{dim}: {n} human-rated samples (< {g.min_samples}, fails closed)")
            continue
        k = float(kq.value.iloc[0])
        r = float(rho.value.iloc[0]) if len(rho) else float("nan")
        kappas.append(k)
        ok = k >= g.threshold and r >= min_rho
        if not ok:
            fails.append(dim)
        parts.append(f"{dim}: kappa_q {k:.2f}, spearman {r:.2f}{'' if ok else ' (fails)'}")
    if calibration is not None and len(calibration):
        bad = calibration[~calibration.within_tolerance]
        tol = g.params.get("example_tolerance", 1)
        if len(bad):
            fails.append("worked examples")
            parts.append(
                f"examples off by more than ±{tol:g}: "
                + ", ".join(
                    f"{r.example_id}/{r.dimension} stated {r.stated:g} judged "
                    f"{r.judged if r.judged == r.judged else 'missing'}"
                    for r in bad.itertuples()
                )
            )
        else:
            parts.append(f"all {len(calibration)} worked-example scores within ±{tol:g}")
    else:
        parts.append("no worked examples in the document" + (" for this dimension" if len(dims) == 1 else ""))
    value = min(kappas) if kappas else None
    passed = not fails and bool(kappas)
    head = "passes" if passed else f"fails on {', '.join(fails) or 'missing data'}"
    return GateResult(g.name, g.kind, value, g.threshold, passed, n_min or 0, f"{head}; " + "; ".join(parts))
