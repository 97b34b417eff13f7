"""Trust in a judge, as a property of (rubric, judge identity), carried by every checkpoint that identity judges.

The calibration set of a judge identity is every human-rated sample of every checkpoint it judged (pooled), plus
the rubric document's worked examples (``judge_calibration``). On the pooled set, per rated dimension, the
judge's agreement with the human mean (quadratic kappa and Spearman, each with its bootstrap interval) gives a
verdict:

* ``pending``: fewer rated samples than the rubric's minimum (``judge_reliability.min_samples``); ``needed``
  says how many more would settle it. Neither a pass nor a failure.
* ``trusted``: kappa >= the gate's threshold and Spearman >= its ``min_spearman``.
* ``untrusted``: otherwise.

A checkpoint with enough ratings of its own also gets a drift check: when the upper end of its own kappa's
interval lies below the pooled kappa, the judge behaves differently on this model's outputs (``drift``). Drift
does not change the verdict on the judge (a property of the judge); it fails the judge on this checkpoint.
The overall row (dimension ``ALL``) is pending if any dimension is, else untrusted if any is, else trusted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from pydantic import Field

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.config.gates import GateParams
from eval_pipeline.core.contracts import JUDGE_VS_HUMAN_MEAN
from eval_pipeline.core.types import Row

TRUSTED, UNTRUSTED, PENDING = "trusted", "untrusted", "pending"
OVERALL = "ALL"
DEFAULT_KAPPA, DEFAULT_MIN_SAMPLES = 0.6, 30


class ReliabilityParams(GateParams):
    """The judge_reliability gate's ``params`` (its kappa bar is the gate's threshold, its minimum the gate's
    min_samples)."""

    min_spearman: float = Field(0.5, description="The judge's Spearman with the people's mean must reach it too.")
    example_tolerance: float = Field(1.0, description="How far the judge may be from a worked example's stated score.")


_PARAMS = ReliabilityParams()

TRUST_COLUMNS = [
    "checkpoint_id",
    "judge_identity",
    "judge_label",
    "dimension",
    "n_rated",
    "n_checkpoints",
    "kappa_quadratic",
    "kappa_ci_low",
    "kappa_ci_high",
    "spearman",
    "spearman_ci_low",
    "spearman_ci_high",
    "verdict",
    "needed",
    "own_n",
    "own_kappa_quadratic",
    "drift",
    "reason",
]
DTYPES = {
    "n_rated": "int64",
    "n_checkpoints": "int64",
    "needed": "int64",
    "own_n": "int64",
    "kappa_quadratic": "float64",
    "kappa_ci_low": "float64",
    "kappa_ci_high": "float64",
    "spearman": "float64",
    "spearman_ci_low": "float64",
    "spearman_ci_high": "float64",
    "own_kappa_quadratic": "float64",
    "drift": "boolean",
}


@dataclass(frozen=True)
class JudgeBar:
    """What a judge must reach, from the rubric's judge_reliability gate (else the defaults)."""

    kappa: float = DEFAULT_KAPPA
    spearman: float = _PARAMS.min_spearman
    min_samples: int = DEFAULT_MIN_SAMPLES
    example_tolerance: float = _PARAMS.example_tolerance


def judge_bar(rubric: RubricConfig) -> JudgeBar:
    """The rubric's bar for its judge: the one place its judge_reliability gate is looked up."""
    for g in rubric.gates:
        if g.kind == "judge_reliability":
            p = ReliabilityParams.model_validate(g.params)
            return JudgeBar(float(g.threshold), p.min_spearman, int(g.min_samples), p.example_tolerance)
    return JudgeBar()


def _stat(agreement: pd.DataFrame, dim: str, statistic: str) -> tuple[int, float, float, float]:
    rows = agreement[
        (agreement.dimension == dim) & (agreement.raters == JUDGE_VS_HUMAN_MEAN) & (agreement.statistic == statistic)
    ]
    if rows.empty:
        return 0, math.nan, math.nan, math.nan
    r = rows.iloc[0]
    return int(r.n_items), float(r.value), float(r.ci_low), float(r.ci_high)


def trust_rows(
    rubric: RubricConfig,
    checkpoint_id: str,
    identity: str,
    label: str,
    pooled: pd.DataFrame,
    own: pd.DataFrame,
    n_checkpoints: int,
) -> pd.DataFrame:
    """The verdict of ``identity`` on ``rubric`` from its pooled agreement rows (``pooled``, from
    compute_agreement over every rated sample it judged) and this checkpoint's own (``own``)."""
    bar = judge_bar(rubric)
    min_kappa, min_rho, min_n = bar.kappa, bar.spearman, bar.min_samples
    rows: list[Row] = []
    for dim in rubric.rating_scales:
        n, k, k_lo, k_hi = _stat(pooled, dim, "cohen_kappa_quadratic")
        _, rho, r_lo, r_hi = _stat(pooled, dim, "spearman")
        own_n, own_k, _, own_hi = _stat(own, dim, "cohen_kappa_quadratic")
        drift: bool | None = None
        if n < min_n or math.isnan(k):
            verdict = PENDING
            reason = (
                f"{n} human-rated samples judged by this judge across {n_checkpoints} checkpoint(s), "
                f"{min_n} needed: {min_n - n} more rated samples would settle it"
            )
        else:
            ok = k >= min_kappa and not math.isnan(rho) and rho >= min_rho
            reason = (
                f"kappa_q {k:.2f} [{k_lo:.2f}, {k_hi:.2f}], spearman {rho:.2f} on {n} rated samples "
                f"from {n_checkpoints} checkpoint(s) (needs kappa_q >= {min_kappa:g}, spearman >= {min_rho:g})"
            )
            if own_n >= min_n and not math.isnan(own_hi):
                drift = bool(own_hi < k)
                if drift:
                    reason += f"; drift: on this checkpoint kappa_q {own_k:.2f} (its interval below the pooled {k:.2f})"
            verdict = TRUSTED if ok else UNTRUSTED
        rows.append(
            dict(
                checkpoint_id=checkpoint_id,
                judge_identity=identity,
                judge_label=label,
                dimension=dim,
                n_rated=n,
                n_checkpoints=n_checkpoints,
                kappa_quadratic=k,
                kappa_ci_low=k_lo,
                kappa_ci_high=k_hi,
                spearman=rho,
                spearman_ci_low=r_lo,
                spearman_ci_high=r_hi,
                verdict=verdict,
                needed=max(0, min_n - n),
                own_n=own_n,
                own_kappa_quadratic=own_k,
                drift=drift,
                reason=reason,
            )
        )
    verdicts = [r["verdict"] for r in rows]
    overall = PENDING if PENDING in verdicts else UNTRUSTED if UNTRUSTED in verdicts else TRUSTED
    if not rows:
        overall = PENDING
    by = {v: [r["dimension"] for r in rows if r["verdict"] == v] for v in (TRUSTED, UNTRUSTED, PENDING)}
    summary = "; ".join(f"{v} on {', '.join(d)}" for v, d in by.items() if d) or "no rated dimensions"
    drifted = [r["dimension"] for r in rows if r["drift"]]
    if drifted:
        summary += (
            f"; drift on {', '.join(drifted)}: this checkpoint's own kappa_q interval is below the pooled kappa_q"
        )
    least = min((r["n_rated"] for r in rows), default=0)
    if overall == PENDING:
        summary = (
            f"pending: {least} human-rated samples judged by it across {n_checkpoints} checkpoint(s), {min_n} "
            f"needed: {max(0, min_n - least)} more rated samples would settle it ({summary})"
        )
    rows.append(
        dict(
            checkpoint_id=checkpoint_id,
            judge_identity=identity,
            judge_label=label,
            dimension=OVERALL,
            n_rated=least,
            n_checkpoints=n_checkpoints,
            kappa_quadratic=min(
                (r["kappa_quadratic"] for r in rows if r["kappa_quadratic"] == r["kappa_quadratic"]), default=math.nan
            ),
            kappa_ci_low=math.nan,
            kappa_ci_high=math.nan,
            spearman=min((r["spearman"] for r in rows if r["spearman"] == r["spearman"]), default=math.nan),
            spearman_ci_low=math.nan,
            spearman_ci_high=math.nan,
            verdict=overall,
            needed=max((r["needed"] for r in rows), default=min_n),
            own_n=min((r["own_n"] for r in rows), default=0),
            own_kappa_quadratic=math.nan,
            drift=any(r["drift"] for r in rows) if any(r["drift"] is not None for r in rows) else None,
            reason=f"{label}: {summary}",
        )
    )
    return pd.DataFrame(rows, columns=TRUST_COLUMNS).astype(DTYPES)
