"""One raw line as JSON, strictly: what the warehouse could not hold is this line's problem, found here."""

from __future__ import annotations

import json
import math
from typing import Any


def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not valid JSON")


INT64_MAX = 2**63 - 1


def _parse_int(token: str) -> int:
    """JSON integers that fit the warehouse (BIGINT); a longer one is this line's problem, not its chunk's."""
    if len(token.lstrip("-")) > 19 or abs(int(token)) > INT64_MAX:
        raise ValueError(f"number too large: an integer of {len(token.lstrip('-'))} digits")
    return int(token)


def _parse_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"number too large: {token[:20]}{'...' if len(token) > 20 else ''} is not a finite double")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"duplicate key(s) {', '.join(repr(k) for k in dupes)} in one object")
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
