"""One raw line as JSON, strictly: what the warehouse could not hold is this line's problem, found here."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from eval_pipeline.core.types import JSONObject


def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not valid JSON")


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _parse_int(token: str) -> int:
    """JSON integers that fit the warehouse (BIGINT, -2**63 .. 2**63-1); another is this line's problem, not its
    chunk's (the digits are counted before any conversion, so a number of a million digits costs nothing)."""
    if len(token.lstrip("-")) > 19 or not INT64_MIN <= int(token) <= INT64_MAX:
        raise ValueError(f"number too large: an integer of {len(token.lstrip('-'))} digits is outside the 64-bit range")
    return int(token)


def _parse_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"number too large: {token[:20]}{'...' if len(token) > 20 else ''} is not a finite double")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> JSONObject:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        counts = Counter(k for k, _ in pairs)  # one pass: an object of 30,000 keys costs what it reads
        dupes = sorted(k for k, n in counts.items() if n > 1)
        shown = ", ".join(repr(k[:40]) for k in dupes[:5]) + (f" and {len(dupes) - 5} more" if len(dupes) > 5 else "")
        raise ValueError(f"duplicate key(s) {shown} in one object")
    return obj


def parse_line(text: str) -> Any:
    """One raw line as JSON, strictly: no NaN/Infinity, no number the warehouse cannot hold, no key twice in one
    object, no text that is not valid Unicode (a lone surrogate written as an escape)."""
    obj = json.loads(
        text,
        parse_constant=_reject_constant,
        parse_int=_parse_int,
        parse_float=_parse_float,
        object_pairs_hook=_no_duplicate_keys,
    )
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode()
        raise ValueError(f"text is not valid Unicode: lone surrogate {bad}") from None
    return obj
