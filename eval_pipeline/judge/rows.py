"""Rows of the judge_scores table: one per sample, judge and dimension; questionnaire sums; the panel's aggregate."""

from __future__ import annotations

import statistics
from typing import Any

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import PANEL


def _row(
    ckpt: str,
    sid: str,
    judge: str,
    kind: str,
    model: str,
    dim: str,
    dim_kind: str,
    score: float | None,
    reason: str | None,
    rationale: str = "",
    cached: bool = False,
    version: str = "",
    pt: int = 0,
    ct: int = 0,
    lat: float | None = None,
    attempts: int = 0,
) -> dict[str, Any]:
    return dict(
        checkpoint_id=ckpt,
        sample_id=sid,
        judge=judge,
        judge_kind=kind,
        model=model,
        dimension=dim,
        kind=dim_kind,
        score=None if score is None else float(score),
        chosen_score=None if score is None else float(score),
        expected_score=None,
        score_distribution=None,
        status="ok" if score is not None else "missing",
        reason=reason,
        rationale=rationale,
        cached=cached,
        rubric_version=version,
        prompt_tokens=pt,
        completion_tokens=ct,
        latency_ms=lat,
        attempts=attempts,
    )


def _questionnaire_rows(rubric: RubricConfig, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-metric sums (reverse-scored items as max + min - s) and the total, for one sample and judge."""
    q = rubric.questionnaire
    if q is None or not rows:
        return []
    by_item = {r["dimension"]: r for r in rows}
    base = rows[0]
    out = []
    totals: list[float] = []
    for m in q.metrics:
        vals, reasons = [], []
        for item in m.items:
            r = by_item.get(item.id)
            if r is None or r["score"] is None:
                reasons.append(item.id)
                continue
            vals.append(q.scale.max + q.scale.min - r["score"] if item.reverse else r["score"])
        if reasons:
            score, reason = None, f"items missing: {', '.join(reasons)}"
        else:
            score, reason = float(sum(vals)), None
            totals.append(score)
        out.append(
            {
                **base,
                "dimension": m.key,
                "kind": "questionnaire_metric",
                "score": score,
                "status": "ok" if score is not None else "missing",
                "reason": reason,
                "rationale": "",
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "latency_ms": None,
                "attempts": 0,
                "cached": False,
            }
        )
    ok = len(totals) == len(q.metrics)
    out.append(
        {
            **base,
            "dimension": f"{q.key}_total",
            "kind": "questionnaire_total",
            "score": float(sum(totals)) if ok else None,
            "status": "ok" if ok else "missing",
            "reason": None if ok else "a metric is missing",
            "rationale": "",
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "latency_ms": None,
            "attempts": 0,
            "cached": False,
        }
    )
    return out


def _panel_rows(rubric: RubricConfig, rows: list[dict[str, Any]], aggregate: str) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["sample_id"], r["dimension"]), []).append(r)
    judges = sorted({r["judge"] for r in rows})
    kinds = sorted({r["judge_kind"] for r in rows})
    out = []
    for (sid, dim), rs in groups.items():
        ok = [r["score"] for r in rs if r["score"] is not None]
        if ok:
            # one judge (the usual panel): its score as it is; statistics.mean is exact but slow (Fractions)
            score = ok[0] if len(ok) == 1 else statistics.mean(ok) if aggregate == "mean" else statistics.median(ok)
            reason = None if len(ok) == len(rs) else f"{len(rs) - len(ok)} of {len(rs)} judges missing"
        else:
            score = None
            reason = "; ".join(sorted({f"{r['judge']}: {r['reason']}" for r in rs}))[:500]
        base = rs[0]
        out.append(
            _row(
                base["checkpoint_id"],
                sid,
                PANEL,
                "+".join(kinds),
                ",".join(judges),
                dim,
                base["kind"],
                score,
                reason,
                f"{aggregate} of {len(ok)} judge(s)",
                all(r["cached"] for r in rs),
                rubric.version,
            )
        )
        if score is not None and reason is not None:
            out[-1]["reason"] = reason  # partial panel: scored, with a note
        chosen = [r["chosen_score"] for r in rs if r.get("chosen_score") is not None]
        exp = [r["expected_score"] for r in rs if r.get("expected_score") is not None]
        agg = statistics.fmean if aggregate == "mean" else statistics.median
        out[-1]["chosen_score"] = (chosen[0] if len(chosen) == 1 else agg(chosen)) if chosen else None
        # the panel's expected score only when every judge that scored gave one (else it would mix two readings)
        out[-1]["expected_score"] = (exp[0] if len(exp) == 1 else agg(exp)) if exp and len(exp) == len(ok) else None
    return out
