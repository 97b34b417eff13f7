"""``judge_reliability``: trust in the judge, decided per judge identity on its pooled calibration set
(``judge_trust``, written by the agreement asset: every rated sample of every checkpoint the same judge scored)
and on the rubric document's worked examples. A checkpoint carries the verdict of the judge that scored it:
``trusted`` passes, ``untrusted`` (or drift on this checkpoint's own ratings) fails, ``pending`` (too few rated
samples yet) is pending, with how many more ratings would settle it. One result per dimension beside the overall
one, shown beside the judge's scores."""

from __future__ import annotations

import pandas as pd
from pydantic import Field

from eval_pipeline.agreement.reliability import within_tolerance
from eval_pipeline.agreement.trust import OVERALL, PENDING, TRUSTED, ReliabilityParams
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import (
    BATCH_PENDING,
    RELIABILITY_DRIFTS,
    RELIABILITY_UNTRUSTED,
    WAITING_ON_BATCH,
)
from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateInputs, GateResult, GateSpec, pending


class ReliabilitySpec(GateSpec):
    params: ReliabilityParams = Field(default_factory=ReliabilityParams)


def _parts(g: GateSpec, rubric: RubricConfig) -> list[str]:
    judged = bool(rubric.judged_dimensions or rubric.questionnaire)
    return [f"{g.name}_{d}" for d in rubric.rating_scales] if judged else []


def _examples(g: ReliabilitySpec, calibration: pd.DataFrame | None, dim: str | None) -> tuple[bool | None, str]:
    """Whether the worked examples (of ``dim``, or all) are within tolerance (None: some of their scores are still
    waiting on a judge batch), and what to say about them."""
    if calibration is None or calibration.empty:
        return True, "no worked examples in the document" + (" for this dimension" if dim else "")
    cal = calibration if dim is None else calibration[calibration.dimension == dim]
    if cal.empty:
        return True, "no worked examples for this dimension"
    if "reason" in cal:
        waiting = cal.judged.isna() & cal.reason.fillna("").astype(str).str.contains(BATCH_PENDING, regex=False)
        if waiting.any():
            return None, f"{int(waiting.sum())} worked-example scores {WAITING_ON_BATCH}"
    tol = g.params.example_tolerance
    bad = cal[~within_tolerance(cal.judged - cal.stated, tol)]
    if bad.empty:
        return True, f"all {len(cal)} worked-example scores within ±{tol:g}"
    shown = ", ".join(
        f"{r.example_id}/{r.dimension} stated {r.stated:g} judged "
        + ("missing" if r.judged != r.judged else f"{round(r.judged, 2):g}")
        for r in bad.itertuples()
    )
    return False, f"worked examples off by more than ±{tol:g}: {shown}"


def _one(
    g: ReliabilitySpec, name: str, row: pd.Series, calibration: pd.DataFrame | None, dim: str | None
) -> GateResult:
    n = int(row.n_rated)
    value = None if row.kappa_quadratic != row.kappa_quadratic else float(row.kappa_quadratic)
    examples_ok, examples = _examples(g, calibration, dim)
    if examples_ok is None and row.verdict != PENDING:  # the examples' answers are on their way
        return pending(g, n, f"{examples}; {row.reason}", value, name)
    if row.verdict == PENDING:  # said once (#72: it read "pending: … pending: …")
        return pending(g, n, f"{str(row.reason).replace(f'{PENDING}: ', '', 1)}; {examples}", value, name)
    drift = False if pd.isna(row.drift) else bool(row.drift)
    passed = row.verdict == TRUSTED and bool(examples_ok) and not drift
    if row.verdict != TRUSTED:
        head = RELIABILITY_UNTRUSTED
    elif drift:
        head = RELIABILITY_DRIFTS
    else:
        head = "trusted" if examples_ok else "trusted on ratings, not on the worked examples"
    return GateResult(name, g.kind, value, g.threshold, passed, n, f"{head}: {row.reason}; {examples}")


@gate(
    "judge_reliability",
    spec=ReliabilitySpec,
    needs=("agreement", "judge_calibration"),
    check_target="judge_scores",
    parts=_parts,
)
def judge_reliability(
    g: ReliabilitySpec, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs
) -> list[GateResult]:
    trust = inputs.table("judge_trust")
    calibration = inputs.table("judge_calibration")
    if trust is None or trust.empty:
        return [
            pending(
                g,
                0,
                "no verdict on this judge yet (its identity is recorded when it scores; run judge_scores "
                "and agreement)",
            )
        ]
    by_dim = {str(r.dimension): r for _, r in trust.iterrows()}
    out = [_one(g, g.name, by_dim[OVERALL], calibration, None)] if OVERALL in by_dim else []
    for dim in rubric.rating_scales:
        if dim in by_dim:
            out.append(_one(g, f"{g.name}_{dim}", by_dim[dim], calibration, dim))
    return out
