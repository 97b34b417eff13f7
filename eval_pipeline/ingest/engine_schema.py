"""The pandera schema of a rubric's samples, derived from its declared input fields: the one definition of a
valid sample, run by pandera's Polars backend on what DuckDB measured of each JSON line (``engine.measure_sql``).

For every field the frame holds ``<name>__t``, the JSON type DuckDB found at its path (null when the path is
missing), and ``<name>``, its value where a rule reads it (numbers, booleans, fields with an allowed set; typed,
null when absent or of another type). Texts carry ``__len`` (characters) and ``__slen`` (characters once
Python's whitespace is stripped from both ends) where a rule reads them (``text_lengths``); lists ``__et`` (the
distinct types of their elements) and ``__n`` (length); objects
with required keys ``__kt<i>``/``__kl<i>`` (the types and stripped lengths of key i in every object). Each rule
is a vectorized expression with the error text the quarantine shows; "typed" rules hold for a value that is
absent or of another type (the type rule reports that).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pandera.polars as pa
import polars as pl

from eval_pipeline.core.config import InputField, RubricConfig

# Python's str.strip() whitespace (what "stripped text" has always meant here), not Rust's or RE2's
PY_WHITESPACE = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())
INTEGER_TYPES = ("BIGINT", "UBIGINT")
NUMBER_TYPES = (*INTEGER_TYPES, "DOUBLE")
# the JSON types (as DuckDB names them) a scalar field's value may have
SCALAR_TYPES = {"string": ("VARCHAR",), "integer": INTEGER_TYPES, "number": NUMBER_TYPES, "boolean": ("BOOLEAN",)}
TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a finite number",
    "boolean": "true or false",
    "string_list": "a list of strings",
    "object": "a JSON object",
    "object_list": "a list of JSON objects",
}
LIST_TYPES = ("string_list", "object_list")
ID_REPEATED = "sample id repeated within the checkpoint (first occurrence kept)"


def _t(f: InputField) -> pl.Expr:
    return pl.col(f"{f.name}__t")


def absent(f: InputField) -> pl.Expr:
    return _t(f).is_null() | (_t(f) == "NULL")


def type_ok(f: InputField) -> pl.Expr:
    t = _t(f)
    if f.type in SCALAR_TYPES:
        return t.is_in(SCALAR_TYPES[f.type])
    if f.type == "object":
        return t == "OBJECT"
    element = "VARCHAR" if f.type == "string_list" else "OBJECT"
    et = pl.col(f"{f.name}__et")
    return (t == "ARRAY") & et.list.eval(pl.element() == element).list.all().fill_null(True)


def _length(f: InputField, stripped: bool) -> pl.Expr:
    if f.type == "string":
        return pl.col(f"{f.name}__slen" if stripped else f"{f.name}__len")
    return pl.col(f"{f.name}__n")


def _keys_ok(f: InputField, i: int) -> pl.Expr:
    n = pl.lit(1) if f.type == "object" else pl.col(f"{f.name}__n")
    strings = pl.col(f"{f.name}__kt{i}").list.eval(pl.element() == "VARCHAR").list.sum()
    nonblank = pl.col(f"{f.name}__kl{i}").list.eval(pl.element() > 0).list.all()
    return (strings == n) & nonblank.fill_null(False)


def _check(rule: pl.Expr, error: str) -> pa.Check:
    def run(data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(rule.fill_null(False))

    return pa.Check(run, error=error)


def min_length(f: InputField, rubric: RubricConfig) -> int:
    """The least length of a text or list (a response may not be empty even when its rubric says nothing)."""
    if f.name == rubric.inputs.response_field and not f.min_length:
        return 1
    return f.min_length or 0


def text_lengths(f: InputField, rubric: RubricConfig) -> tuple[bool, bool]:
    """Which lengths of a text field its rules read: (``__len``, for a most length; ``__slen``, the stripped
    length, for a least length and the sample id). The engine measures only these (a stripped length costs a
    pass over the text)."""
    if f.type != "string":
        return False, False
    return bool(f.max_length), bool(min_length(f, rubric)) or f.name == rubric.inputs.id_field


# long by design: one rule per field property (type, allowed, lengths, bounds, keys), in the order the quarantine
# reports them; the list is the schema
def field_checks(f: InputField, rubric: RubricConfig) -> list[pa.Check]:
    present = ~absent(f)
    typed: Callable[[pl.Expr], pl.Expr] = lambda rule: absent(f) | ~type_ok(f) | rule  # noqa: E731
    checks: list[pa.Check] = []
    if f.required:
        checks.append(_check(present, "required field is missing or null"))
    checks.append(_check(absent(f) | type_ok(f), f"must be {TYPE_WORDS[f.type]}"))
    min_len = min_length(f, rubric)
    if f.allowed is not None:
        allowed = list(f.allowed)
        checks.append(_check(typed(pl.col(f.name).is_in(allowed)), f"must be one of {allowed}"))
    if min_len and f.type in ("string", *LIST_TYPES):
        msg = "must not be empty" if min_len == 1 else f"must have at least {min_len} characters/items"
        checks.append(_check(typed(_length(f, stripped=True) >= min_len), msg))
    if f.max_length and f.type in ("string", *LIST_TYPES):
        checks.append(
            _check(
                typed(_length(f, stripped=False) <= f.max_length), f"must have at most {f.max_length} characters/items"
            )
        )
    if f.minimum is not None and f.type in ("integer", "number"):
        checks.append(_check(typed(pl.col(f.name) >= f.minimum), f"must be >= {f.minimum:g}"))
    if f.maximum is not None and f.type in ("integer", "number"):
        checks.append(_check(typed(pl.col(f.name) <= f.maximum), f"must be <= {f.maximum:g}"))
    if f.keys and f.type in ("object", "object_list"):
        rule = pl.lit(True)
        for i in range(len(f.keys)):
            rule = rule & _keys_ok(f, i)
        checks.append(_check(typed(rule), f"every object needs non-empty string keys {list(f.keys)}"))
    return checks


def build_engine_schema(rubric: RubricConfig) -> pa.DataFrameSchema:
    """The schema of the measured columns. Repeated ids are judged by the engine after it, among the lines that
    pass (the first occurrence is kept)."""
    columns: dict[str, pa.Column] = {}
    for f in rubric.inputs.fields:
        checks = field_checks(f, rubric)
        if f.name == rubric.inputs.id_field:
            is_str = (_t(f) == "VARCHAR").fill_null(False)
            checks.append(
                _check(~is_str | (pl.col(f"{f.name}__slen") > 0), "sample id must not be empty or only whitespace")
            )
        columns[f.name] = pa.Column(None, checks=checks, nullable=True, coerce=False)
    return pa.DataFrameSchema(columns, strict=False, name=f"{rubric.name}.samples")
