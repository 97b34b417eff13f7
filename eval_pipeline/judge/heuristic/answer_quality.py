"""Features for routed RAG/KPI answers: semantics, completeness, numbers within tolerance, presentation."""

from __future__ import annotations

import re

from eval_pipeline.core.params import Params
from eval_pipeline.core.text import (
    any_phrase,
    content_words,
    numbers,
    overlap,
    sentences,
)
from eval_pipeline.core.types import JSONObject, Record
from eval_pipeline.judge.heuristic import feature
from eval_pipeline.judge.heuristic.base import text_of

CLARIFY = ["do you mean", "could you clarify", "which period", "what would you like", "which products", "clarify"]
REFUSAL = ["cannot provide", "can't provide", "out of scope", "cannot answer", "i can help with"]
UNCERTAIN = ["i don't have", "not available", "couldn't find", "don't state", "i can't"]


class AnswerParams(Params):
    criteria_field: str = "answer_criteria"
    ground_truth_field: str = "ground_truth"
    tolerance: float = 0.05  # a number within this share of the reference is right


def _criteria(sample: Record, p: AnswerParams) -> JSONObject:
    c = sample.get(p.criteria_field)
    return c if isinstance(c, dict) else {}


def numbers_match(
    response: str, ground_truth: JSONObject | None, criteria: JSONObject, tolerance: float = 0.05
) -> float | None:
    """Share of reference numbers matched within ±tolerance (or numbers in numerical_range); None if none apply."""
    found = numbers(response)
    refs = [float(v) for v in (ground_truth or {}).values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    rng = criteria.get("numerical_range")
    checks = []
    for ref in refs:
        checks.append(any(abs(x - ref) <= tolerance * abs(ref) for x in found) if ref else any(x == 0 for x in found))
    if isinstance(rng, list) and len(rng) == 2:
        checks.append(any(rng[0] <= x <= rng[1] for x in found))
    return sum(checks) / len(checks) if checks else None


@feature("aq_semantic", params=AnswerParams)
def aq_semantic(sample: Record, p: AnswerParams) -> float | None:
    r = text_of(sample, "response")
    q = text_of(sample, "query")
    if any_phrase(r, CLARIFY) or any_phrase(r, REFUSAL):
        return 0.8
    must = _criteria(sample, p).get("must_contain") or []
    topic = (
        (sum(1 for m in must if m.lower() in r.lower()) / len(must))
        if must
        else (overlap(content_words(q), content_words(r)) or 0)
    )
    tangent = any_phrase(r, ["by the way", "also launched"])
    uncertain = any_phrase(r, UNCERTAIN)
    score = 0.2 + 0.4 * topic + (0.2 if len(r) >= 50 else 0.0) + (0.2 if not tangent else 0.0)
    return min(1.0, score) * (0.6 if uncertain else 1.0)


@feature("aq_completeness", params=AnswerParams)
def aq_completeness(sample: Record, p: AnswerParams) -> float | None:
    r = text_of(sample, "response")
    c = _criteria(sample, p)
    must = c.get("must_contain") or []
    acc = c.get("acceptable_if_includes") or []
    must_ok = all(m.lower() in r.lower() for m in must) if must else True
    acc_share = sum(1 for a in acc if a.lower() in r.lower()) / len(acc) if acc else 0.5
    specific = 1.0 if numbers(r) or any_phrase(r, CLARIFY + REFUSAL) else 0.0
    multi = 1.0 if len(sentences(r)) >= 3 or "\n" in r else 0.0
    score = 0.3 * must_ok + 0.25 * acc_share + 0.2 * specific + 0.25 * multi
    if len(r) < 50:
        score = min(score, 0.6)  # the length heuristic: < 50 characters, max 3/5
    return score


@feature("aq_accuracy", params=AnswerParams)
def aq_accuracy(sample: Record, p: AnswerParams) -> float | None:
    r = text_of(sample, "response")
    gt = sample.get(p.ground_truth_field)
    match = numbers_match(r, gt if isinstance(gt, dict) else None, _criteria(sample, p), p.tolerance)
    if any_phrase(r, UNCERTAIN) and not numbers(r):
        return 0.6  # honest uncertainty: not penalised, not verified
    if match is None:
        # nothing to verify against: the document gives plausible claims the benefit of the doubt
        return 0.9
    return 0.2 + 0.8 * match


@feature("aq_presentation", params=AnswerParams)
def aq_presentation(sample: Record, p: AnswerParams) -> float | None:
    r = text_of(sample, "response")
    structured = (
        1.0 if ("\n" in r or re.search(r"^\s*[-•*\d]+[.)]?\s", r, re.M)) else 0.5 if len(sentences(r)) >= 2 else 0.3
    )
    cased = 1.0 if r[:1].isupper() else 0.0
    n = len(r)
    detail = 1.0 if 40 <= n <= 900 else 0.5
    return 0.4 * structured + 0.3 * cased + 0.3 * detail


# --- roleplay ---------------------------------------------------------------------------------
