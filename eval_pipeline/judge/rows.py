"""Rows of the judge_scores table: one per sample, judge and dimension; questionnaire sums; the panel's aggregate."""

from __future__ import annotations

import json
import statistics
from typing import Any

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import PANEL
from eval_pipeline.core.types import Row
from eval_pipeline.judge.logprobs import Reading, expected


def score_row(
    *,
    checkpoint_id: str,
    sample_id: str,
    judge: str,
    judge_kind: str,
    model: str,
    dimension: str,
    kind: str,
    score: float | None,
    reason: str | None,
    rationale: str = "",
    cached: bool = False,
    rubric_version: str = "",
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    latency_ms: float | None = None,
    attempts: int = 0,
) -> Row:
    """One judge_scores row (its columns are core.contracts.SCORE_COLUMNS): ``score`` None is a missing score with
    its ``reason``; the score source is the written score until ``reading`` says otherwise."""
    return dict(
        checkpoint_id=checkpoint_id,
        sample_id=sample_id,
        judge=judge,
        judge_kind=judge_kind,
        model=model,
        dimension=dimension,
        kind=kind,
        score=None if score is None else float(score),
        chosen_score=None if score is None else float(score),
        expected_score=None,
        score_distribution=None,
        score_source=None if score is None else "chosen",
        prob_on_scale=None,
        distribution_note=None,
        status="ok" if score is not None else "missing",
        reason=reason,
        rationale=rationale,
        cached=cached,
        rubric_version=rubric_version,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        latency_ms=latency_ms,
        attempts=attempts,
    )


def questionnaire_rows(rubric: RubricConfig, rows: list[Row]) -> list[Row]:
    """Per-metric sums (reverse-scored items as max + min - s) and the total, for one sample and judge."""
    q = rubric.questionnaire
    if q is None or not rows:
        return []
    by_item = {r["dimension"]: r for r in rows}
    base = {**rows[0], "score_distribution": None, "prob_on_scale": None, "distribution_note": None}
    lo_hi = q.scale.max + q.scale.min

    def summed(column: str, items: list[Any]) -> float | None:
        """The sum of the items' ``column`` (reverse items mirrored), None when an item lacks it."""
        vals: list[float] = []
        for i in items:
            v = by_item[i.id].get(column) if i.id in by_item else None
            if v is None:
                return None
            vals.append(lo_hi - v if i.reverse else v)
        return float(sum(vals))

    def row(
        dim: str, kind: str, score: float | None, reason: str | None, chosen: float | None, expected: float | None
    ) -> Row:
        return {
            **base,
            "dimension": dim,
            "kind": kind,
            "score": score,
            "chosen_score": chosen,
            "expected_score": expected,
            "status": "ok" if score is not None else "missing",
            "reason": reason,
            "rationale": "",
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "latency_ms": None,
            "attempts": 0,
            "cached": False,
            "score_source": source_of(rows) if score is not None else None,
        }

    out = []
    sums: dict[str, list[float | None]] = {"score": [], "chosen_score": [], "expected_score": []}
    for m in q.metrics:
        missing = [i.id for i in m.items if i.id not in by_item or by_item[i.id]["score"] is None]
        score = None if missing else summed("score", m.items)
        chosen, exp = (None, None) if missing else (summed("chosen_score", m.items), summed("expected_score", m.items))
        for k, v in (("score", score), ("chosen_score", chosen), ("expected_score", exp)):
            sums[k].append(v)
        reason = f"items missing: {', '.join(missing)}" if missing else None
        out.append(row(m.key, "questionnaire_metric", score, reason, chosen, exp))

    def total(k: str) -> float | None:
        given = [v for v in sums[k] if v is not None]
        return None if len(given) < len(sums[k]) else float(sum(given))

    ok = total("score") is not None
    out.append(
        row(
            f"{q.key}_total",
            "questionnaire_total",
            total("score"),
            None if ok else "a metric is missing",
            total("chosen_score"),
            total("expected_score"),
        )
    )
    return out


def panel_rows(rubric: RubricConfig, rows: list[Row], aggregate: str) -> list[Row]:
    groups: dict[tuple[str, str], list[Row]] = {}
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
            score_row(
                checkpoint_id=base["checkpoint_id"],
                sample_id=sid,
                judge=PANEL,
                judge_kind="+".join(kinds),
                model=",".join(judges),
                dimension=dim,
                kind=base["kind"],
                score=score,
                reason=reason,
                rationale=f"{aggregate} of {len(ok)} judge(s)",
                cached=all(r["cached"] for r in rs),
                rubric_version=rubric.version,
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
        if len(rs) == 1:  # one judge: its distribution is the panel's
            out[-1]["score_distribution"] = rs[0].get("score_distribution")
            out[-1]["prob_on_scale"] = rs[0].get("prob_on_scale")
            out[-1]["distribution_note"] = rs[0].get("distribution_note")
        out[-1]["score_source"] = source_of(rs) if score is not None else None
    return out


def source_of(rows: list[Row]) -> str | None:
    """What fed these rows' scores together: ``expected``, ``chosen``, or ``mixed`` (never silently one)."""
    sources = {r.get("score_source") for r in rows if r.get("score") is not None and r.get("score_source")}
    if not sources:
        return None
    return sources.pop() if len(sources) == 1 else "mixed"


def reading(
    chosen: float | None, dist: dict[int, float] | None, source: str, found: Reading | None = None
) -> tuple[float | None, Row]:
    """The score that feeds the results (the expected score over ``dist`` when there is one and ``source`` says
    so, else the written one) and the row's written / expected / distribution columns, which say which fed it
    (``score_source``) and, when probabilities were read but not used, why (``found``, logprobs.Reading)."""
    exp = expected(dist) if dist else None
    use_expected = exp is not None and source == "expected"
    score = exp if use_expected else chosen
    columns = dict(
        chosen_score=None if chosen is None else float(chosen),
        expected_score=exp,
        score_distribution=json.dumps({str(k): round(p, 6) for k, p in dist.items()}) if dist else None,
        score_source=None if score is None else ("expected" if use_expected else "chosen"),
        prob_on_scale=None if found is None else found.share,
        distribution_note=None if found is None or found.dist is not None else found.note,
    )
    return score, columns
