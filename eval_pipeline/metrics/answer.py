"""Answer-quality metrics: the route score and the test case's answer_criteria.

Similarity to the reference (for `min_semantic_similarity`) is the cosine of
stemmed content-word count vectors between the answer and the reference answer
(`ground_truth.reference_answer`, else the query and the criteria's keywords).
It is deterministic, needs no model and no corpus, and is comparable across
checkpoints; it measures lexical, not deep semantic, similarity, so it is a
screening signal next to the judge's semantic score, not a replacement.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from eval_pipeline.core.text import content_words, numbers, stem
from eval_pipeline.metrics import metric


@metric("route_score")
def route_score(records: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, list[Any]]:
    """1.0 when the actual route is the preferred one, 0.7 when it is an acceptable alternative, else 0.0."""
    a_f = params.get("actual_field", "actual_route")
    p_f = params.get("preferred_field", "preferred_route")
    acc_f = params.get("acceptable_field", "acceptable_routes")
    v_pref, v_acc, v_wrong = params.get("preferred", 1.0), params.get("acceptable", 0.7), params.get("wrong", 0.0)
    scores, status = [], []
    for r in records:
        actual = (r.get(a_f) or "").strip().lower()
        preferred = (r.get(p_f) or "").strip().lower()
        acceptable = {x.strip().lower() for x in (r.get(acc_f) or [])}
        if actual == preferred:
            scores.append(v_pref)
            status.append("PERFECT")
        elif actual in acceptable:
            scores.append(v_acc)
            status.append("ACCEPTABLE")
        else:
            scores.append(v_wrong)
            status.append("WRONG")
    return {"route_score": scores, "route_status": status}


def lexical_similarity(a: str, b: str) -> float | None:
    ca = Counter(stem(w) for w in content_words(a))
    cb = Counter(stem(w) for w in content_words(b))
    if not ca or not cb:
        return None
    dot = sum(v * cb.get(k, 0) for k, v in ca.items())
    return dot / (math.sqrt(sum(v * v for v in ca.values())) * math.sqrt(sum(v * v for v in cb.values())))


def within_tolerance(found: list[float], ref: float, tol: float) -> bool:
    return any(abs(x - ref) <= tol * abs(ref) for x in found) if ref else any(x == 0 for x in found)


def length_band(n: int) -> str:
    return "short" if n < 50 else "reasonable" if n <= 200 else "detailed"


@metric("answer_criteria")
def answer_criteria(records: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, list[Any]]:
    c_f = params.get("criteria_field", "answer_criteria")
    gt_f = params.get("ground_truth_field", "ground_truth")
    r_f = params.get("response_field", "response")
    q_f = params.get("query_field", "query")
    tol = float(params.get("tolerance", 0.05))
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "must_contain_all",
            "must_contain_missing",
            "acceptable_hits",
            "acceptable_total",
            "numerical_range_ok",
            "numbers_within_tolerance",
            "numbers_checked",
            "length_chars",
            "length_band",
            "reference_similarity",
            "similarity_threshold",
            "similarity_ok",
        )
    }
    for r in records:
        text = r.get(r_f) or ""
        low = text.lower()
        crit: dict = r.get(c_f) or {} if isinstance(r.get(c_f), dict) else {}
        gt: dict = r.get(gt_f) or {} if isinstance(r.get(gt_f), dict) else {}
        must = [str(m) for m in crit.get("must_contain") or []]
        missing = [m for m in must if m.lower() not in low]
        cols["must_contain_all"].append(not missing if must else None)
        cols["must_contain_missing"].append(json.dumps(missing))
        acc = [str(a) for a in crit.get("acceptable_if_includes") or []]
        cols["acceptable_hits"].append(sum(1 for a in acc if a.lower() in low))
        cols["acceptable_total"].append(len(acc))
        found = numbers(text)
        rng = crit.get("numerical_range")
        cols["numerical_range_ok"].append(
            any(rng[0] <= x <= rng[1] for x in found) if isinstance(rng, list) and len(rng) == 2 else None
        )
        refs = [float(v) for v in gt.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        checks = [within_tolerance(found, ref, tol) for ref in refs]
        cols["numbers_within_tolerance"].append(sum(checks) / len(checks) if checks else None)
        cols["numbers_checked"].append(len(checks))
        cols["length_chars"].append(len(text))
        cols["length_band"].append(length_band(len(text)))
        threshold = crit.get("min_semantic_similarity")
        if threshold is not None:
            reference = gt.get("reference_answer") or " ".join([r.get(q_f) or "", *must, *acc])
            sim = lexical_similarity(text, reference)
            cols["reference_similarity"].append(sim)
            cols["similarity_threshold"].append(float(threshold))
            cols["similarity_ok"].append(None if sim is None else sim >= float(threshold))
        else:
            cols["reference_similarity"].append(None)
            cols["similarity_threshold"].append(None)
            cols["similarity_ok"].append(None)
    return cols
