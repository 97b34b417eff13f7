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

from eval_pipeline.core.params import Params
from eval_pipeline.core.text import content_words, numbers, stem
from eval_pipeline.core.types import Columns, JSONObject, Record, Value
from eval_pipeline.metrics import metric


class RouteParams(Params):
    actual_field: str = "actual_route"
    preferred_field: str = "preferred_route"
    acceptable_field: str = "acceptable_routes"
    preferred: float = 1.0
    acceptable: float = 0.7
    wrong: float = 0.0


@metric("route_score", params=RouteParams)
def route_score(records: list[Record], p: RouteParams) -> Columns:
    """1.0 when the actual route is the preferred one, 0.7 when it is an acceptable alternative, else 0.0."""
    a_f, p_f, acc_f = p.actual_field, p.preferred_field, p.acceptable_field
    v_pref, v_acc, v_wrong = p.preferred, p.acceptable, p.wrong
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


class CriteriaParams(Params):
    criteria_field: str = "answer_criteria"
    ground_truth_field: str = "ground_truth"
    response_field: str = "response"
    query_field: str = "query"
    tolerance: float = 0.05  # a number within this share of the reference is right


@metric("answer_criteria", params=CriteriaParams)
def answer_criteria(records: list[Record], p: CriteriaParams) -> Columns:
    c_f, gt_f, r_f, q_f, tol = p.criteria_field, p.ground_truth_field, p.response_field, p.query_field, p.tolerance
    cols: dict[str, list[Value]] = {
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
        crit: JSONObject = r.get(c_f) or {} if isinstance(r.get(c_f), dict) else {}
        gt: JSONObject = r.get(gt_f) or {} if isinstance(r.get(gt_f), dict) else {}
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
