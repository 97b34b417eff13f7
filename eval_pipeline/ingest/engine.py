"""Validation where the data is: DuckDB parses the raw lines and extracts every declared field, pandera's Polars
backend checks them (``engine_schema``), and only the lines DuckDB cannot judge alone go through Python.

DuckDB's JSON reader is more lenient than the rules of a raw line (NaN and Infinity, trailing commas, numbers
no column can hold, duplicate keys, lone surrogates are all accepted or mangled), so a line goes to Python's
strict parser (``parse_line``, the reasons the quarantine has always shown) when it is not valid JSON for
DuckDB, is not an object, matches a cheap pattern of those leniencies, or holds a key DuckDB cannot prove
unique. A line Python accepts comes back as canonical JSON and is extracted like the rest; everything else
(about 1 % of a typical file) never leaves the engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import duckdb
import pandas as pd
import pandera.polars as pa
import polars as pl
import pyarrow as pa_arrow

from eval_pipeline.core.config import InputField, RubricConfig
from eval_pipeline.core.contracts import QUARANTINE_COLUMNS
from eval_pipeline.ingest.engine_schema import LIST_TYPES, build_engine_schema
from eval_pipeline.ingest.parsing import parse_line

# leniencies of DuckDB's reader (case-insensitive nan/inf values, 16+ digit numbers, 3-digit exponents, trailing
# commas, escaped surrogates) and a key written with space before its colon (the key count below needs `":`)
SUSPICIOUS = r'(?i)[:,\[]\s*[-+]?(nan|inf)|[0-9]{16}|[eE][+-]?[0-9]{3}|,\s*[\]}]|\\u[dD][89abAB]|"\s+:'


def _path(parts: Sequence[str]) -> str:
    return "$" + "".join('."' + p.replace("\\", "\\\\").replace('"', '\\"') + '"' for p in parts)


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _object_paths(rubric: RubricConfig) -> tuple[list[str], list[str]]:
    """The objects whose keys DuckDB checks for repeats: the root, every object a field path walks through,
    every declared object field; and (second list) every declared list of objects."""
    objects: dict[str, None] = {"$": None}
    lists: dict[str, None] = {}
    for f in rubric.inputs.fields:
        parts = f.json_path
        for k in range(1, len(parts)):
            objects[_path(parts[:k])] = None
        if f.type == "object":
            objects[_path(parts)] = None
        elif f.type == "object_list":
            lists[_path(parts) + "[*]"] = None
    return list(objects), list(lists)


def route_sql(rubric: RubricConfig, src: str) -> str:
    """The lines Python must judge: decode errors, what DuckDB cannot parse or parses too leniently, non-objects,
    and lines whose `":` count differs from the keys of the checked objects or whose checked keys repeat.

    One CASE (its branches in order: a JSON function on text that is not JSON raises) gives each line that
    DuckDB can judge its key lists (a struct: ``ks`` for the objects, ``ls<i>`` per list of objects), used twice
    below; the `":` count is a string split (a replace copied every line: 4x slower on 1M lines)."""
    objects, lists = _object_paths(rubric)
    keysets = [f"'ks': json_keys(raw_line, [{', '.join(map(_lit, objects))}])"]
    keysets += [f"'ls{i}': coalesce(json_keys(raw_line, {_lit(p)}), [])" for i, p in enumerate(lists)]
    judged = (
        "CASE WHEN decode_error IS NOT NULL THEN NULL WHEN NOT json_valid(raw_line) THEN NULL "
        f"WHEN regexp_matches(raw_line, {_lit(SUSPICIOUS)}) THEN NULL WHEN json_type(raw_line) <> 'OBJECT' THEN NULL "
        f"ELSE {{{', '.join(keysets)}}} END AS k"
    )
    counted = "list_sum(list_transform(k.ks, x -> coalesce(len(x), 0)))"
    repeated = "list_bool_or(list_transform(k.ks, x -> coalesce(len(list_distinct(x)) <> len(x), false)))"
    for i in range(len(lists)):
        counted += f" + coalesce(list_sum(list_transform(k.ls{i}, x -> len(x))), 0)"
        repeated += f" OR coalesce(list_bool_or(list_transform(k.ls{i}, x -> len(list_distinct(x)) <> len(x))), false)"
    text_keys = "len(string_split(raw_line, '\":')) - 1"
    return (
        f"SELECT line_number, raw_line, decode_error FROM (SELECT line_number, raw_line, decode_error, {judged} "
        f"FROM {src}) WHERE k IS NULL OR ({text_keys}) <> ({counted}) OR ({repeated})"
    )


def _value_sql(f: InputField, t: str, v: str) -> str:
    if f.type == "string":
        return f"CASE WHEN {t} = 'VARCHAR' THEN {v} END"
    if f.type == "integer":
        return f"CASE WHEN {t} IN ('BIGINT', 'UBIGINT') THEN {v}::BIGINT END"
    if f.type == "number":
        return f"CASE WHEN {t} IN ('BIGINT', 'UBIGINT', 'DOUBLE') THEN {v}::DOUBLE END"
    if f.type == "boolean":
        return f"CASE WHEN {t} = 'BOOLEAN' THEN {v}::BOOLEAN END"
    return f"CASE WHEN {t} IN ('OBJECT', 'ARRAY') THEN {v} END"  # JSON text, checked by the schema


def extract_sql(rubric: RubricConfig, lines: str) -> str:
    """Every declared field of the lines in a range of line numbers: one parse per line for all paths."""
    fields = rubric.inputs.fields
    paths = "[" + ", ".join(_lit(_path(f.json_path)) for f in fields) + "]"
    cols = ["line_number"]
    for i, f in enumerate(fields, start=1):
        t, v, n = f"t[{i}]", f"v[{i}]", f.name
        cols += [f'{_value_sql(f, t, v)} AS "{n}"', f'{t} AS "{n}__t"']
        if f.type in LIST_TYPES:
            cols += [
                f"CASE WHEN {t} = 'ARRAY' THEN json_type({v}, '$[*]') END AS \"{n}__et\"",
                f"CASE WHEN {t} = 'ARRAY' THEN json_array_length({v}) END AS \"{n}__n\"",
            ]
        if f.keys and f.type in ("object", "object_list"):
            for k, key in enumerate(f.keys):
                kp = ("$[*]" if f.type == "object_list" else "$") + _path([key])[1:]
                if f.type == "object":
                    kt, kv = f"[json_type({v}, {_lit(kp)})]", f"[json_extract_string({v}, {_lit(kp)})]"
                else:
                    kt, kv = f"json_type({v}, {_lit(kp)})", f"json_extract_string({v}, {_lit(kp)})"
                cols += [
                    f"CASE WHEN {t} IN ('OBJECT', 'ARRAY') THEN {kt} END AS \"{n}__kt{k}\"",
                    f"CASE WHEN {t} IN ('OBJECT', 'ARRAY') THEN {kv} END AS \"{n}__kv{k}\"",
                ]
    idt, idv = next((f"t[{i}]", f"v[{i}]") for i, f in enumerate(fields, 1) if f.name == rubric.inputs.id_field)
    # the key a repeat is judged on: Python's repr of the value, as the row-wise rule had it
    cols.append(
        f"CASE WHEN {idt} IS NULL THEN '<missing>' WHEN {idt} = 'VARCHAR' THEN {idv} WHEN {idt} = 'NULL' THEN 'None' "
        f"WHEN {idt} = 'BOOLEAN' THEN CASE WHEN {idv} = 'true' THEN 'True' ELSE 'False' END "
        f"WHEN {idt} IN ('BIGINT', 'UBIGINT') THEN {idv} ELSE 'json:' || {idv} END AS __id_key"
    )
    return (
        f"SELECT {', '.join(cols)} FROM (SELECT line_number, json_type(j, {paths}) AS t, "
        f"json_extract_string(j, {paths}) AS v FROM {lines}) ORDER BY line_number"
    )


_ARROW_TYPES = {"integer": pa_arrow.int64(), "number": pa_arrow.float64(), "boolean": pa_arrow.bool_()}


def empty_samples(rubric: RubricConfig) -> pa_arrow.Table:
    """No samples, with the columns and types a rubric's samples table has."""
    fields = [("checkpoint_id", pa_arrow.string()), ("line_number", pa_arrow.int64())]
    fields += [(f.name, _ARROW_TYPES.get(f.type, pa_arrow.string())) for f in rubric.inputs.fields]
    fields.append(("rubric_version", pa_arrow.string()))
    return pa_arrow.schema(fields).empty_table()


@dataclass
class EngineValidation:
    """One file's lines (the relation ``src``: line_number, raw_line, decode_error, source_file) split into
    valid samples (Arrow chunks, yielded by ``run``) and the quarantine (built when ``run`` is done)."""

    con: duckdb.DuckDBPyConnection
    rubric: RubricConfig
    src: str
    params: list[Any]
    checkpoint_id: str
    chunk_lines: int = 100_000
    stage: str = "validate"
    lines_read: int = 0
    valid: int = 0
    bad: dict[int, list[str]] = field(default_factory=dict)

    def _route(self) -> pa_arrow.Table:
        """Python's verdict on the lines DuckDB cannot judge: a reason, or canonical JSON to extract."""
        rows = self.con.execute(route_sql(self.rubric, self.src), self.params).fetchall()
        numbers: list[int] = []
        canonical: list[str] = []
        for number, text, decode_error in rows:
            if decode_error:
                self.bad[number] = [decode_error]
                continue
            try:
                obj = parse_line(text)
            except (json.JSONDecodeError, ValueError, RecursionError) as exc:
                self.bad[number] = [f"malformed JSON: {exc}"]
                continue
            if not isinstance(obj, dict):
                self.bad[number] = [f"expected a JSON object, got {type(obj).__name__}"]
                continue
            numbers.append(number)
            canonical.append(json.dumps(obj, ensure_ascii=False))
        numbers += list(self.bad)
        canonical += [None] * len(self.bad)  # type: ignore[list-item]
        return pa_arrow.table(
            {
                "line_number": pa_arrow.array(numbers, pa_arrow.int64()),
                "j": pa_arrow.array(canonical, pa_arrow.string()),
            }
        )

    def run(self) -> Iterator[pa_arrow.Table]:
        con, rubric = self.con, self.rubric
        (n, lo, hi) = con.execute(
            f"SELECT count(*), min(line_number), max(line_number) FROM {self.src}", self.params
        ).fetchone() or (0, None, None)
        self.lines_read = int(n)
        if not n:
            return
        routed = self._route()
        con.register("_routed", routed)
        lines = (
            f"(SELECT s.line_number, coalesce(r.j, s.raw_line) AS j FROM {self.src} s LEFT JOIN _routed r "
            "USING (line_number) WHERE (r.line_number IS NULL OR r.j IS NOT NULL) AND s.line_number BETWEEN ? AND ?)"
        )
        sql = extract_sql(rubric, lines)
        schema = build_engine_schema(rubric)
        seen = pl.Series("__id_key", [], dtype=pl.String)  # the id keys of every object on earlier lines
        names = [f.name for f in rubric.inputs.fields]
        try:
            for start in range(int(lo), int(hi) + 1, self.chunk_lines):
                arrow = con.execute(sql, [*self.params, start, start + self.chunk_lines - 1]).to_arrow_table()
                if arrow.num_rows == 0:
                    continue
                frame = pl.from_arrow(arrow)
                assert isinstance(frame, pl.DataFrame)
                key = pl.col("__id_key")
                frame = frame.with_columns(
                    (~key.is_first_distinct() | key.is_in(seen.implode())).alias("__id_repeated")
                )
                seen = pl.concat([seen, frame["__id_key"]])
                failing = self._check(schema, frame)
                ok = frame.filter(~pl.col("line_number").is_in(failing))
                self.valid += ok.height
                yield self._samples(ok, names)
        finally:
            con.unregister("_routed")

    def _check(self, schema: pa.DataFrameSchema, frame: pl.DataFrame) -> list[int]:
        """The line numbers that fail; every reason is added to ``bad``."""
        try:
            schema.validate(frame, lazy=True)
            return []
        except pa.errors.SchemaErrors as exc:
            cases = exc.failure_cases
        numbers = frame["line_number"]
        failing: list[int] = []
        for idx, column, check in cases.select("index", "column", "check").iter_rows():
            number = int(numbers[int(idx)])
            reasons = self.bad.setdefault(number, [])
            if not reasons:
                failing.append(number)
            reasons.append(f"field '{column}' {check}")
        return failing

    def _samples(self, ok: pl.DataFrame, names: list[str]) -> pa_arrow.Table:
        out = ok.select(
            pl.lit(self.checkpoint_id, dtype=pl.String).alias("checkpoint_id"),
            pl.col("line_number").cast(pl.Int64),
            *[pl.col(n) for n in names],
            pl.lit(self.rubric.version, dtype=pl.String).alias("rubric_version"),
        )
        return out.to_arrow()

    def quarantine(self) -> pd.DataFrame:
        """Every rejected line with its raw text and every reason (in the order the rules report them)."""
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        numbers = sorted(self.bad)
        reasons = pa_arrow.table(
            {
                "line_number": pa_arrow.array(numbers, pa_arrow.int64()),
                "reason": pa_arrow.array(["; ".join(dict.fromkeys(self.bad[n])) for n in numbers], pa_arrow.string()),
            }
        )
        self.con.register("_reasons", reasons)
        try:
            df = self.con.execute(
                f"SELECT ? AS rubric, ? AS checkpoint_id, s.source_file, r.line_number, ? AS stage, r.reason, "
                f"s.raw_line FROM _reasons r JOIN {self.src} s USING (line_number) ORDER BY r.line_number",
                [self.rubric.name, self.checkpoint_id, self.stage, *self.params],
            ).df()
        finally:
            self.con.unregister("_reasons")
        df["line_number"] = df["line_number"].astype("int64")
        df["quarantined_at"] = pd.Series([now] * len(df), dtype="datetime64[ns]")
        return df[QUARANTINE_COLUMNS]

    def reason_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for reasons in self.bad.values():
            for r in dict.fromkeys(reasons):
                key = r.split(":")[0] if r.startswith("malformed JSON") else r
                counts[key] = counts.get(key, 0) + 1
        return counts


__all__ = ["EngineValidation", "empty_samples", "extract_sql", "route_sql"]
