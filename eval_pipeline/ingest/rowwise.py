"""Validating raw lines against a rubric's declared input fields (pandera, lazy).

Every raw line ends either in the samples frame or in the quarantine frame
with its reason: malformed JSON, not an object, wrong types, missing fields,
values outside the allowed set or length, a sample id repeated within the
checkpoint (the first occurrence is kept), an empty response. Validation is
lazy: every problem of a row is reported, not only the first.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any

import pandas as pd
from pandera.errors import SchemaErrors

from eval_pipeline.core.config import InputField, RubricConfig
from eval_pipeline.core.contracts import QUARANTINE_COLUMNS
from eval_pipeline.core.types import JSONObject
from eval_pipeline.ingest.engine_schema import ID_REPEATED
from eval_pipeline.ingest.parsing import parse_line
from eval_pipeline.ingest.schema import MISSING, build_schema, id_key, is_absent
from eval_pipeline.ingest.validation import ValidationResult


def _extract(obj: JSONObject, path: list[str]) -> Any:
    cur: Any = obj
    for part in path:
        if not isinstance(cur, dict) or part not in cur:
            return MISSING
        cur = cur[part]
    return cur


def _column_for(f: InputField, values: list[Any]) -> pd.Series:
    clean = [None if is_absent(v) else v for v in values]
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
    _field_reasons(rubric, frame, positions, reasons)
    # repeats among the lines that pass every other check: a rejected line never makes a later valid one a repeat
    seen = seen_ids if seen_ids is not None else set()
    local: set[str] = set()
    ids = frame[rubric.inputs.id_field].tolist()
    for i, p in enumerate(positions):
        if p in reasons:
            continue
        key = id_key(ids[i])
        if key in seen or key in local:
            reasons[p] = [f"field '{rubric.inputs.id_field}' {ID_REPEATED}"]
        local.add(key)


def _field_reasons(
    rubric: RubricConfig, frame: pd.DataFrame, positions: list[int], reasons: dict[int, list[str]]
) -> None:
    """Every check but the repeat check, line by line."""
    try:
        build_schema(rubric, repeats=False).validate(frame, lazy=True)
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
    single = build_schema(rubric, repeats=False)
    for i, p in enumerate(positions):
        try:
            single.validate(frame.iloc[[i]].reset_index(drop=True), lazy=True)
        except SchemaErrors as exc:
            for _, row in exc.failure_cases.iterrows():
                msg = f"field '{row['column']}' {row['check']}"
                if msg not in reasons.get(p, []):
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
    parsed: dict[int, JSONObject] = {}
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
        seen_ids.update(id_key(v) for v in samples[rubric.inputs.id_field])
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
