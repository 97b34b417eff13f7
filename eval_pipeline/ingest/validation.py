"""Validating raw lines against a rubric's declared input fields (pandera, lazy).

Every raw line ends either in the samples frame or in the quarantine frame
with its reason: malformed JSON, not an object, wrong types, missing fields,
values outside the allowed set or length, a sample id repeated within the
checkpoint (the first occurrence is kept), an empty response. Validation is
lazy: every problem of a row is reported, not only the first.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaErrors

from eval_pipeline.core.config import InputField, RubricConfig
from eval_pipeline.core.contracts import QUARANTINE_COLUMNS


def empty_quarantine() -> pd.DataFrame:
    """A quarantine frame with no rows but the table's real types (so a new table gets them)."""
    return pd.DataFrame(
        {
            "rubric": pd.Series(dtype="object"),
            "checkpoint_id": pd.Series(dtype="object"),
            "source_file": pd.Series(dtype="object"),
            "line_number": pd.Series(dtype="int64"),
            "stage": pd.Series(dtype="object"),
            "reason": pd.Series(dtype="object"),
            "raw_line": pd.Series(dtype="object"),
            "quarantined_at": pd.Series(dtype="datetime64[ns]"),
        }
    )


class _Missing:
    """Marks a field absent from the JSON object (as opposed to present and null)."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


def _absent(v: Any) -> bool:
    return v is MISSING or v is None


def _is_type(ftype: str, v: Any) -> bool:
    if ftype == "string":
        return isinstance(v, str)
    if ftype == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if ftype == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ftype == "boolean":
        return isinstance(v, bool)
    if ftype == "string_list":
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if ftype == "object":
        return isinstance(v, dict)
    if ftype == "object_list":
        return isinstance(v, list) and all(isinstance(x, dict) for x in v)
    raise ValueError(ftype)


_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a finite number",
    "boolean": "true or false",
    "string_list": "a list of strings",
    "object": "a JSON object",
    "object_list": "a list of JSON objects",
}


def _when_present(fn: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: True if _absent(v) else bool(fn(v))


def _length(v: Any) -> int:
    return len(v.strip()) if isinstance(v, str) else len(v)


# long by design: one check per field property (type, allowed, lengths, bounds, keys), each a pandera Check; the list is
# the schema
def _field_checks(f: InputField, rubric: RubricConfig) -> list[pa.Check]:
    checks: list[pa.Check] = []
    if f.required:
        checks.append(
            pa.Check(
                lambda v: not _absent(v), element_wise=True, ignore_na=False, error="required field is missing or null"
            )
        )
    checks.append(
        pa.Check(
            _when_present(functools.partial(_is_type, f.type)),
            element_wise=True,
            ignore_na=False,
            error=f"must be {_TYPE_WORDS[f.type]}",
        )
    )
    typed = lambda fn, t=f.type: _when_present(lambda v: (not _is_type(t, v)) or fn(v))  # noqa: E731
    min_len = f.min_length
    if f.name == rubric.inputs.response_field and not min_len:
        min_len = 1
    if f.allowed is not None:
        allowed = list(f.allowed)
        checks.append(
            pa.Check(
                typed(lambda v: v in allowed), element_wise=True, ignore_na=False, error=f"must be one of {allowed}"
            )
        )
    if min_len and f.type in ("string", "string_list", "object_list"):
        msg = "must not be empty" if min_len == 1 else f"must have at least {min_len} characters/items"
        checks.append(
            pa.Check(typed(lambda v, n=min_len: _length(v) >= n), element_wise=True, ignore_na=False, error=msg)
        )
    if f.max_length and f.type in ("string", "string_list", "object_list"):
        checks.append(
            pa.Check(
                typed(lambda v, n=f.max_length: len(v) <= n),
                element_wise=True,
                ignore_na=False,
                error=f"must have at most {f.max_length} characters/items",
            )
        )
    if f.minimum is not None and f.type in ("integer", "number"):
        checks.append(
            pa.Check(
                typed(lambda v, m=f.minimum: v >= m),
                element_wise=True,
                ignore_na=False,
                error=f"must be >= {f.minimum:g}",
            )
        )
    if f.maximum is not None and f.type in ("integer", "number"):
        checks.append(
            pa.Check(
                typed(lambda v, m=f.maximum: v <= m),
                element_wise=True,
                ignore_na=False,
                error=f"must be <= {f.maximum:g}",
            )
        )
    if f.keys and f.type in ("object", "object_list"):
        keys = list(f.keys)

        def has_keys(v: Any) -> bool:
            items = [v] if isinstance(v, dict) else v
            return all(all(isinstance(it.get(k), str) and it[k].strip() for k in keys) for it in items)

        checks.append(
            pa.Check(
                typed(has_keys),
                element_wise=True,
                ignore_na=False,
                error=f"every object needs non-empty string keys {keys}",
            )
        )
    return checks


def _id_key(v: Any) -> str:
    return v if isinstance(v, str) else repr(v)


def build_schema(rubric: RubricConfig, seen_ids: set[str] | None = None) -> pa.DataFrameSchema:
    """The pandera schema of a rubric's samples, derived from its declared input fields.

    `seen_ids` holds the ids kept from earlier chunks of the same file, so a repeat is caught across chunks."""
    seen = seen_ids if seen_ids is not None else set()
    columns: dict[str, pa.Column] = {}
    for f in rubric.inputs.fields:
        checks = _field_checks(f, rubric)
        if f.name == rubric.inputs.id_field:
            checks.append(
                pa.Check(
                    lambda s: s.map(lambda v: not isinstance(v, str) or bool(v.strip())),
                    error="sample id must not be empty or only whitespace",
                )
            )
            checks.append(
                pa.Check(
                    lambda s: ~(s.map(_id_key).duplicated(keep="first") | s.map(_id_key).isin(seen)),
                    error="sample id repeated within the checkpoint (first occurrence kept)",
                )
            )
        columns[f.name] = pa.Column(object, checks=checks, nullable=True, coerce=False)
    return pa.DataFrameSchema(columns, strict=False, name=f"{rubric.name}.samples")


def _extract(obj: dict, path: list[str]) -> Any:
    cur: Any = obj
    for part in path:
        if not isinstance(cur, dict) or part not in cur:
            return MISSING
        cur = cur[part]
    return cur


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


@dataclass
class ValidationResult:
    samples: pd.DataFrame
    quarantine: pd.DataFrame
    lines_read: int
    reasons: dict[str, int]


def _column_for(f: InputField, values: list[Any]) -> pd.Series:
    clean = [None if _absent(v) else v for v in values]
    if f.type in ("string_list", "object", "object_list"):
        return pd.Series([None if v is None else json.dumps(v, ensure_ascii=False) for v in clean], dtype="object")
    if f.type == "integer":
        return pd.Series(clean, dtype="Int64")
    if f.type == "number":
        return pd.Series(clean, dtype="float64")
    if f.type == "boolean":
        return pd.Series(clean, dtype="boolean")
    return pd.Series(clean, dtype="object")


def _schema_reasons(
    rubric: RubricConfig,
    frame: pd.DataFrame,
    positions: list[int],
    seen_ids: set[str] | None,
    reasons: dict[int, list[str]],
) -> None:
    """The pandera schema's findings, row by row. A check that failed for the frame as a whole (no row index:
    a value no check could compare) is run again line by line, so it lands on the line that caused it and
    never on its neighbours."""
    try:
        build_schema(rubric, seen_ids).validate(frame, lazy=True)
        return
    except SchemaErrors as exc:
        fc = exc.failure_cases
    whole = False
    for _, row in fc.iterrows():
        idx = row.get("index")
        if idx is None or (isinstance(idx, float) and math.isnan(idx)):
            whole = True
            continue
        reasons.setdefault(positions[int(idx)], []).append(f"field '{row['column']}' {row['check']}")
    if not whole:
        return
    single = build_schema(rubric, set(seen_ids or ()))  # repeats were judged above, on the whole frame
    for i, p in enumerate(positions):
        try:
            single.validate(frame.iloc[[i]].reset_index(drop=True), lazy=True)
        except SchemaErrors as exc:
            for _, row in exc.failure_cases.iterrows():
                msg = f"field '{row['column']}' {row['check']}"
                if msg not in reasons.get(p, []) and "repeated" not in str(row["check"]):
                    reasons.setdefault(p, []).append(msg)
        except Exception as exc:  # noqa: BLE001 - a value pandera itself cannot handle: this line's problem
            reasons.setdefault(p, []).append(f"cannot be validated: {type(exc).__name__}: {exc}")


# long by design: the quarantine contract in one place: decode, parse, validate, repeated ids, accounting (#17 moves
# this into the engine)
def validate_raw(
    rubric: RubricConfig, raw: pd.DataFrame, stage: str = "validate", seen_ids: set[str] | None = None
) -> ValidationResult:
    """Split raw lines into valid samples and quarantined rows (with reasons).

    Pass the same `seen_ids` set for every chunk of one file: valid ids are added to it."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    reasons: dict[int, list[str]] = {}
    parsed: dict[int, dict] = {}
    for pos, (text, decode_error) in enumerate(zip(raw["raw_line"].tolist(), raw["decode_error"].tolist())):
        if decode_error:
            reasons[pos] = [decode_error]
            continue
        try:
            obj = parse_line(text)
        except (json.JSONDecodeError, ValueError, RecursionError) as exc:
            reasons[pos] = [f"malformed JSON: {exc}"]
            continue
        if not isinstance(obj, dict):
            reasons[pos] = [f"expected a JSON object, got {type(obj).__name__}"]
            continue
        parsed[pos] = obj

    positions = sorted(parsed)
    fields = rubric.inputs.fields
    frame = pd.DataFrame(
        {f.name: pd.Series([_extract(parsed[p], f.json_path) for p in positions], dtype="object") for f in fields},
    )  # RangeIndex: pandera misaligns element-wise failures on a non-contiguous index
    if positions:
        _schema_reasons(rubric, frame, positions, seen_ids, reasons)

    valid_pos = [p for p in positions if p not in reasons]
    samples = pd.DataFrame(
        {
            "checkpoint_id": raw["checkpoint_id"].iloc[valid_pos].tolist() if valid_pos else [],
            "line_number": pd.Series(raw["line_number"].iloc[valid_pos].tolist(), dtype="int64"),
        }
    )
    row_of = {p: i for i, p in enumerate(positions)}
    for f in fields:
        col = frame[f.name].tolist()
        samples[f.name] = _column_for(f, [col[row_of[p]] for p in valid_pos]).values
    if seen_ids is not None:
        seen_ids.update(_id_key(v) for v in samples[rubric.inputs.id_field])
    samples["rubric_version"] = rubric.version

    bad_pos = sorted(reasons)
    quarantine = pd.DataFrame(
        {
            "rubric": rubric.name,
            "checkpoint_id": raw["checkpoint_id"].iloc[bad_pos].tolist(),
            "source_file": raw["source_file"].iloc[bad_pos].tolist(),
            "line_number": pd.Series(raw["line_number"].iloc[bad_pos].tolist(), dtype="int64"),
            "stage": stage,
            "reason": ["; ".join(dict.fromkeys(reasons[p])) for p in bad_pos],
            "raw_line": raw["raw_line"].iloc[bad_pos].tolist(),
            "quarantined_at": now,
        },
        columns=QUARANTINE_COLUMNS,
    )
    counts: dict[str, int] = {}
    for p in bad_pos:
        for r in dict.fromkeys(reasons[p]):
            key = r.split(":")[0] if r.startswith("malformed JSON") else r
            counts[key] = counts.get(key, 0) + 1
    return ValidationResult(samples, quarantine, len(raw), counts)
