"""Parsing a judge's answer into scores, strictly.

Accepts a JSON object (with the schema) or, for endpoints without structured
output, the first JSON object found in free text (a ```json fence included).
Every expected key must be present with an integer on its scale; anything else
raises :class:`JudgeParseError` with the reason. Nothing unparseable ever
becomes a score.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from eval_pipeline.core.types import JSONObject

FENCE_RE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


class JudgeParseError(ValueError):
    """The answer could not be turned into valid scores."""


@dataclass(frozen=True)
class Parsed:
    scores: dict[str, int]
    rationale: str


def first_object(text: str) -> JSONObject:
    text = text.strip()
    if not text:
        raise JudgeParseError("empty answer")
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            return obj
    except json.JSONDecodeError:
        pass
    m = FENCE_RE.search(text)
    if m:
        try:
            obj = json.loads(m.group(1))
            if isinstance(obj, dict):
                return obj
        except json.JSONDecodeError:
            pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch == "{":
            try:
                obj, _ = decoder.raw_decode(text, i)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    snippet = text[:80].replace("\n", " ")
    raise JudgeParseError(f"no JSON object in the answer: {snippet!r}")


def parse_answer(text: str | None, container: str, scales: dict[str, tuple[int, int]]) -> Parsed:
    """Scores for exactly the keys of `scales`, each an integer within (min, max)."""
    if text is None:
        raise JudgeParseError("no answer content")
    try:
        obj = first_object(text)
    except RecursionError:  # {"a": {"a": ... 5,000 levels deep: no answer any rubric asks for
        raise JudgeParseError("answer nested too deeply to be an answer") from None
    block = obj.get(container)
    if not isinstance(block, dict):
        # tolerate a flat object {"key": n, ...}
        if all(k in obj for k in scales):
            block = obj
        else:
            raise JudgeParseError(f"answer has no '{container}' object")
    scores: dict[str, int] = {}
    problems: list[str] = []
    for key, (lo, hi) in scales.items():
        if key not in block:
            problems.append(f"'{key}' missing")
            continue
        v = block[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            problems.append(f"'{key}' is not a number ({v!r})")
            continue
        if isinstance(v, float) and (not math.isfinite(v) or not v.is_integer()):
            problems.append(f"'{key}' is not an integer ({v!r})")
            continue
        iv = int(v)
        if not lo <= iv <= hi:
            problems.append(f"'{key}' = {iv} is off the scale {lo}-{hi}")
            continue
        scores[key] = iv
    if problems:
        raise JudgeParseError("; ".join(problems))
    rationale = obj.get("rationale")
    return Parsed(scores, rationale if isinstance(rationale, str) else "")
