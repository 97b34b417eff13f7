"""The pandas pandera schema of the row-wise reference validator (``rowwise``); the pipeline validates with
``engine_schema``, and a differential test keeps the two in agreement."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from typing import Any

import pandera.pandas as pa

from eval_pipeline.core.config import InputField, RubricConfig
from eval_pipeline.ingest.engine_schema import ID_REPEATED, TYPE_WORDS


class _Missing:
    """Marks a field absent from the JSON object (as opposed to present and null)."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


def is_absent(v: object) -> bool:
    return v is MISSING or v is None


def _is_type(ftype: str, v: object) -> bool:
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


def _when_present(fn: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: True if is_absent(v) else bool(fn(v))


def _length(v: Any) -> int:
    return len(v.strip()) if isinstance(v, str) else len(v)


# long by design: one check per field property (type, allowed, lengths, bounds, keys), each a pandera Check; the list is
# the schema
def _cell(test: Callable[[object], bool], error: str) -> pa.Check:
    """A check of each cell on its own (a null cell is the test's to judge), failing with ``error``."""
    return pa.Check(test, element_wise=True, ignore_na=False, error=error)


def _field_checks(f: InputField, rubric: RubricConfig) -> list[pa.Check]:
    checks: list[pa.Check] = []
    if f.required:
        checks.append(_cell(lambda v: not is_absent(v), "required field is missing or null"))
    checks.append(_cell(_when_present(functools.partial(_is_type, f.type)), f"must be {TYPE_WORDS[f.type]}"))

    def typed(fn: Callable[[Any], bool], t: str = f.type) -> Callable[[Any], bool]:
        return _when_present(lambda v: (not _is_type(t, v)) or fn(v))

    # bound once per field: the checks' functions read these, never the loop of build_schema
    min_len, most, lowest, highest = f.min_length, f.max_length, f.minimum, f.maximum
    if f.name == rubric.inputs.response_field and not min_len:
        min_len = 1
    if f.allowed is not None:
        allowed = list(f.allowed)
        checks.append(_cell(typed(lambda v: v in allowed), f"must be one of {allowed}"))
    if min_len and f.type in ("string", "string_list", "object_list"):
        msg = "must not be empty" if min_len == 1 else f"must have at least {min_len} characters/items"
        checks.append(_cell(typed(lambda v: _length(v) >= min_len), msg))
    if most and f.type in ("string", "string_list", "object_list"):
        checks.append(_cell(typed(lambda v: len(v) <= most), f"must have at most {f.max_length} characters/items"))
    if lowest is not None and f.type in ("integer", "number"):
        checks.append(_cell(typed(lambda v: v >= lowest), f"must be >= {f.minimum:g}"))
    if highest is not None and f.type in ("integer", "number"):
        checks.append(_cell(typed(lambda v: v <= highest), f"must be <= {f.maximum:g}"))
    if f.keys and f.type in ("object", "object_list"):
        keys = list(f.keys)

        def has_keys(v: Any) -> bool:
            items = [v] if isinstance(v, dict) else v
            return all(all(isinstance(it.get(k), str) and it[k].strip() for k in keys) for it in items)

        checks.append(_cell(typed(has_keys), f"every object needs non-empty string keys {keys}"))
    return checks


def id_key(v: object) -> str:
    """A sample id's identity with its JSON type: the string "5" and the number 5 are different ids."""
    return "s:" + v if isinstance(v, str) else f"j:{type(v).__name__}:{json.dumps(v, sort_keys=True, default=str)}"


def build_schema(rubric: RubricConfig, seen_ids: set[str] | None = None, repeats: bool = True) -> pa.DataFrameSchema:
    """The pandera schema of a rubric's samples, derived from its declared input fields.

    `seen_ids` holds the ids kept from earlier chunks of the same file, so a repeat is caught across chunks; with
    `repeats` False the repeat check is left out (the row-wise reference judges repeats among valid lines)."""
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
            if repeats:
                checks.append(
                    pa.Check(
                        lambda s: ~(s.map(id_key).duplicated(keep="first") | s.map(id_key).isin(seen)),
                        error=ID_REPEATED,
                    )
                )
        columns[f.name] = pa.Column(object, checks=checks, nullable=True, coerce=False)
    return pa.DataFrameSchema(columns, strict=False, name=f"{rubric.name}.samples")
