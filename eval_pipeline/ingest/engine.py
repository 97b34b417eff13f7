"""Validation where the data is: DuckDB reads the raw lines and measures what the rules read of each one, pandera's
Polars backend checks the measures (``engine_schema``), and only the lines DuckDB cannot judge alone go through
Python. The valid rows are then made from the raw lines inside DuckDB (``EngineValidation.samples``).

DuckDB's JSON reader is more lenient than the rules of a raw line (NaN and Infinity, trailing commas, numbers
no column can hold, duplicate keys, lone surrogates are all accepted or mangled), so a line goes to Python's
strict parser (``parse_line``, the reasons the quarantine has always shown) when it is not valid JSON for
DuckDB, is not an object, matches a cheap pattern of those leniencies, or holds a key DuckDB cannot prove
unique. A line Python accepts comes back as canonical JSON and is measured like the rest; everything else
(about 1 % of a typical file) never leaves the engine.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timezone

import duckdb
import pandas as pd
import pandera.polars as pa
import polars as pl
import pyarrow as pa_arrow
import pyarrow.compute as pc

from eval_pipeline.core.config import InputField, RubricConfig
from eval_pipeline.core.contracts import QUARANTINE_COLUMNS
from eval_pipeline.ingest.engine_schema import (
    ID_REPEATED,
    LIST_TYPES,
    PY_WHITESPACE,
    SCALAR_TYPES,
    build_engine_schema,
    text_lengths,
)
from eval_pipeline.ingest.parsing import parse_line
from eval_pipeline.storage.tables import COMPRESSION, Select, literal, qualified

# leniencies of DuckDB's reader (case-insensitive nan/inf values, 16+ digit numbers, 3-digit exponents, trailing
# commas, escaped surrogates) and a key written with space before its colon (the key count below needs `":`)
SUSPICIOUS = r'(?i)[:,\[]\s*[-+]?(nan|inf)|[0-9]{16}|[eE][+-]?[0-9]{3}|,\s*[\]}]|\\u[dD][89abAB]|"\s+:'


def _path(parts: Sequence[str]) -> str:
    return "$" + "".join('."' + p.replace("\\", "\\\\").replace('"', '\\"') + '"' for p in parts)


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


def routed_sql(rubric: RubricConfig, src: str) -> str:
    """Every line of ``src`` with ``__route``: true for the lines Python must judge (decode errors, what DuckDB
    cannot parse or parses too leniently, non-objects, lines whose `":` count differs from the keys of the
    checked objects or whose checked keys repeat), and ``j``, the text DuckDB reads for the others.

    One CASE (its branches in order: a JSON function on text that is not JSON raises) gives each line that
    DuckDB can judge its key lists (a struct: ``ks`` for the objects, ``ls<i>`` per list of objects), used twice
    below; valid JSON whose first character after JSON's whitespace is ``{`` is an object (no parse needed to say
    so); the `":` count is a string split (a replace copied every line: 4x slower on 1M lines)."""
    objects, lists = _object_paths(rubric)
    keysets = [f"'ks': json_keys(raw_line, [{', '.join(map(literal, objects))}])"]
    keysets += [f"'ls{i}': coalesce(json_keys(raw_line, {literal(p)}), [])" for i, p in enumerate(lists)]
    judged = (
        "CASE WHEN decode_error IS NOT NULL THEN NULL WHEN NOT json_valid(raw_line) THEN NULL "
        f"WHEN regexp_matches(raw_line, {literal(SUSPICIOUS)}) THEN NULL "
        "WHEN NOT starts_with(ltrim(raw_line, ' \t\n\r'), '{') THEN NULL "
        f"ELSE {{{', '.join(keysets)}}} END AS k"
    )
    counted = "list_sum(list_transform(k.ks, x -> coalesce(len(x), 0)))"
    repeated = "list_bool_or(list_transform(k.ks, x -> coalesce(len(list_distinct(x)) <> len(x), false)))"
    for i in range(len(lists)):
        counted += f" + coalesce(list_sum(list_transform(k.ls{i}, x -> len(x))), 0)"
        repeated += f" OR coalesce(list_bool_or(list_transform(k.ls{i}, x -> len(list_distinct(x)) <> len(x))), false)"
    text_keys = "len(string_split(raw_line, '\":')) - 1"
    route = f"k IS NULL OR ({text_keys}) <> ({counted}) OR coalesce({repeated}, false)"
    return (
        "(SELECT line_number, __route, CASE WHEN __route THEN raw_line END AS __raw, decode_error AS __decode_error, "
        f"CASE WHEN NOT __route THEN raw_line END AS j FROM (SELECT line_number, raw_line, decode_error, {route} "
        f"AS __route FROM (SELECT line_number, raw_line, decode_error, {judged} FROM {src})))"
    )


_CASTS = {"integer": "::BIGINT", "number": "::DOUBLE", "boolean": "::BOOLEAN"}  # a value's text, typed


def _value_sql(f: InputField, t: str, v: str) -> str:
    """A field's value as its samples column holds it: typed, null when absent or of another type (lists and
    objects: their JSON text, checked by the schema)."""
    types = SCALAR_TYPES.get(f.type, ("OBJECT", "ARRAY"))
    return f"CASE WHEN {t} IN ({', '.join(map(literal, types))}) THEN {v}{_CASTS.get(f.type, '')} END"


def _stripped_length(x: str) -> str:
    """Characters left once Python's whitespace is stripped from both ends (DuckDB's length counts code points,
    as Python and Polars do). Trimming copies the text, so only a text that starts
    or ends with whitespace is trimmed; the first and last characters are cheap to read."""
    ws = literal(PY_WHITESPACE)
    return (
        f"CASE WHEN contains({ws}, {x}[1]) OR contains({ws}, {x}[-1]) THEN length(trim({x}, {ws})) ELSE length({x}) END"
    )


def _paths(rubric: RubricConfig) -> str:
    """Every field's JSON path, as a list literal (one parse of a line reads them all)."""
    return "[" + ", ".join(literal(_path(f.json_path)) for f in rubric.inputs.fields) + "]"


def _parsed(rubric: RubricConfig, lines: str, keep: Sequence[str] = ()) -> str:
    """The lines with ``t`` and ``v``, the JSON type and text at every field's path: one parse each per line."""
    paths, kept = _paths(rubric), "".join(f"{c}, " for c in keep)
    return f"(SELECT line_number, {kept}json_type(j, {paths}) AS t, json_extract_string(j, {paths}) AS v FROM {lines})"


# The JSON types DuckDB's json_type names, as an enum: the measures carry one byte a type, not its name (17 type
# columns of a 245,760-line range: 46 MB of text); a name outside it fails the cast, loudly. Lengths are 32-bit
# (a line is far shorter than 2^31 characters): a range's measures 100 -> 46 MB (1M lines: peak RSS -0.2 GB)
JSON_TYPE = "ENUM('NULL', 'BOOLEAN', 'BIGINT', 'UBIGINT', 'DOUBLE', 'VARCHAR', 'ARRAY', 'OBJECT')"


def measure_sql(rubric: RubricConfig, lines: str, keep: Sequence[str] = ()) -> str:
    """What the schema's rules read of each line (``engine_schema``): every field's JSON type, its value where a
    rule reads it (numbers, booleans, allowed sets), the lengths of texts (where a rule reads them) and lists, the
    distinct types of list elements, key types, the stripped lengths of required keys, and ``__id_key``, the
    sample id as the row-wise rule compared it (Python's repr of the value). Long texts are measured here and
    never leave the engine. ``keep``: columns of ``lines`` passed through."""
    cols = ["line_number", *keep]
    for i, f in enumerate(rubric.inputs.fields, start=1):
        t, v, n = f"t[{i}]", f"v[{i}]", f.name
        long, stripped = text_lengths(f, rubric)  # only the lengths a rule reads: each is a pass over the text
        reads_value = f.type in ("integer", "number", "boolean") or f.allowed is not None
        value = _value_sql(f, t, v) if reads_value else "NULL::VARCHAR"
        cols += [f'{value} AS "{n}"', f'{t}::{JSON_TYPE} AS "{n}__t"']
        if long:
            cols.append(f"CASE WHEN {t} = 'VARCHAR' THEN length({v})::INTEGER END AS \"{n}__len\"")
        if stripped:
            cols.append(f"CASE WHEN {t} = 'VARCHAR' THEN ({_stripped_length(v)})::INTEGER END AS \"{n}__slen\"")
        if f.type in LIST_TYPES:
            cols += [
                f"CASE WHEN {t} = 'ARRAY' THEN list_distinct(json_type({v}, '$[*]'))::{JSON_TYPE}[] END AS \"{n}__et\"",
                f"CASE WHEN {t} = 'ARRAY' THEN json_array_length({v})::INTEGER END AS \"{n}__n\"",
            ]
        if f.keys and f.type in ("object", "object_list"):
            for k, key in enumerate(f.keys):
                kp = ("$[*]" if f.type == "object_list" else "$") + _path([key])[1:]
                if f.type == "object":
                    kt, kv = f"[json_type({v}, {literal(kp)})]", f"[json_extract_string({v}, {literal(kp)})]"
                else:
                    kt, kv = f"json_type({v}, {literal(kp)})", f"json_extract_string({v}, {literal(kp)})"
                cols += [
                    f"CASE WHEN {t} IN ('OBJECT', 'ARRAY') THEN {kt}::{JSON_TYPE}[] END AS \"{n}__kt{k}\"",
                    f"CASE WHEN {t} IN ('OBJECT', 'ARRAY') THEN list_transform({kv}, x -> {_stripped_length('x')}) "
                    f'END AS "{n}__kl{k}"',
                ]
    i = next(i for i, f in enumerate(rubric.inputs.fields, 1) if f.name == rubric.inputs.id_field)
    t, v = f"t[{i}]", f"v[{i}]"
    cols.append(
        f"CASE WHEN {t} IS NULL THEN '<missing>' WHEN {t} = 'VARCHAR' THEN 's:' || {v} "
        f"ELSE 'j:' || {t} || ':' || {v} END AS __id_key"
    )
    return f"SELECT {', '.join(cols)} FROM {_parsed(rubric, lines, keep)}"


def values_sql(rubric: RubricConfig, lines: str) -> str:
    """The samples rows of valid lines (checkpoint and rubric version are the first two parameters). On a valid
    line every field is absent, null or of its declared type (the schema's type rule), so its text at the path
    is its value: null when absent or null, cast for numbers and booleans, JSON text for lists and objects.
    One parse per line (``_value_sql`` needs the JSON type too, a second parse, only to judge a line)."""
    cols = ["?::VARCHAR AS checkpoint_id", "line_number"]
    cols += [f'v[{i}]{_CASTS.get(f.type, "")} AS "{f.name}"' for i, f in enumerate(rubric.inputs.fields, 1)]
    cols.append("?::VARCHAR AS rubric_version")
    return (
        f"SELECT {', '.join(cols)} FROM (SELECT line_number, json_extract_string(j, {_paths(rubric)}) AS v "
        f"FROM {lines})"
    )


_KEEP = ("__route", "__raw", "__decode_error")  # the columns of the routing a range's measures carry
# Python's verdicts on the lines it judged: canonical JSON, or null for a rejected line
_VERDICTS = pa_arrow.schema([("line_number", pa_arrow.int64()), ("j", pa_arrow.string())])
_ARROW_TYPES = {"integer": pa_arrow.int64(), "number": pa_arrow.float64(), "boolean": pa_arrow.bool_()}


LONG_TEXT = 1000  # a string field that may be longer (or has no max_length) is stored with zstd (tables.COMPRESSION)


def empty_samples(rubric: RubricConfig) -> pa_arrow.Table:
    """No samples, with the columns and types a rubric's samples table has."""
    fields = [pa_arrow.field("checkpoint_id", pa_arrow.string()), pa_arrow.field("line_number", pa_arrow.int64())]
    for f in rubric.inputs.fields:
        long_text = f.type == "string" and (f.max_length is None or f.max_length >= LONG_TEXT)
        metadata = {COMPRESSION: b"zstd"} if long_text else None
        fields.append(pa_arrow.field(f.name, _ARROW_TYPES.get(f.type, pa_arrow.string()), metadata=metadata))
    fields.append(pa_arrow.field("rubric_version", pa_arrow.string()))
    return pa_arrow.schema(fields).empty_table()


RAW = "raw"  # the table of lines an in-memory validation reads (make_raw_table)


def make_raw_table(con: duckdb.DuckDBPyConnection) -> None:
    """The table ``raw`` of lines to validate, in an in-memory DuckDB (the columns raw_outputs has)."""
    con.execute(
        f"CREATE TABLE {RAW} (checkpoint_id VARCHAR, source_file VARCHAR, line_number BIGINT, raw_line VARCHAR, "
        "decode_error VARCHAR)"
    )


def insert_raw(con: duckdb.DuckDBPyConnection, rows: pd.DataFrame | pa_arrow.Table) -> None:
    """``rows`` (raw_outputs' columns) added to the table ``raw``."""
    con.register("_rows", rows)
    con.execute(f"INSERT INTO {RAW} SELECT checkpoint_id, source_file, line_number, raw_line, decode_error FROM _rows")
    con.unregister("_rows")


def raw_outputs_of(rubric: RubricConfig, checkpoint_id: str) -> str:
    """The relation of one checkpoint's stored lines (``<rubric>.raw_outputs``) as ``EngineValidation`` reads
    them."""
    return (
        f"(SELECT source_file, line_number, raw_line, decode_error FROM {qualified(rubric.name, 'raw_outputs')} "
        f"WHERE checkpoint_id = {literal(checkpoint_id)})"
    )


@dataclass
class EngineValidation:
    """One file's lines (``src``: a relation without parameters, with line_number, raw_line, decode_error,
    source_file) split into valid samples and the quarantine. ``run`` judges the lines in ranges of
    ``chunk_lines`` line numbers, in order: one pass of DuckDB per range says which lines Python must judge
    (``routed_sql``) and measures the rest (``measure_sql``); Python judges the few, its accepted lines are
    measured the same way, and pandera's Polars backend checks every measure. DuckDB measures the next range
    (on a cursor of its own, in a thread) while Python checks this one. ``samples`` is
    then the query that makes the valid lines' rows inside the engine, ``quarantine`` the rejected lines with
    every reason.

    The ranges run through DuckDB's relation API, whose results are collected in parallel (a query result
    streamed through ``execute`` is built on one thread), so the SQL
    holds literals, not parameters."""

    con: duckdb.DuckDBPyConnection
    rubric: RubricConfig
    src: str
    checkpoint_id: str
    chunk_lines: int = 245_760  # two of DuckDB's row groups: both cores work on each range
    stage: str = "validate"
    lines_read: int = 0
    valid: int = 0
    bad: dict[int, list[str]] = field(default_factory=dict)
    _routed: list[pa_arrow.Table] = field(default_factory=list)  # Python's canonical JSON (null: rejected)

    def _judge(self, rows: pl.DataFrame) -> pa_arrow.Table:
        """Python's verdict on lines DuckDB cannot judge: a reason, or canonical JSON to measure and keep."""
        numbers: list[int] = []
        canonical: list[str | None] = []
        for number, text, decode_error in rows.select("line_number", "__raw", "__decode_error").iter_rows():
            verdict: str | None = None
            if decode_error:
                self.bad[number] = [decode_error]
            else:
                try:
                    obj = parse_line(text)
                except (json.JSONDecodeError, ValueError, RecursionError) as exc:
                    self.bad[number] = [f"malformed JSON: {exc}"]
                else:
                    if isinstance(obj, dict):
                        verdict = json.dumps(obj, ensure_ascii=False)
                    else:
                        self.bad[number] = [f"expected a JSON object, got {type(obj).__name__}"]
            numbers.append(number)
            canonical.append(verdict)
        return pa_arrow.table([numbers, canonical], schema=_VERDICTS)

    def _measured(self, con: duckdb.DuckDBPyConnection, start: int) -> pa_arrow.Table:
        """DuckDB's pass over the range of line numbers from ``start``: which lines Python must judge, and the
        measures of the others."""
        rng = f"(SELECT * FROM {self.src} WHERE line_number BETWEEN {start} AND {start + self.chunk_lines - 1})"
        return con.sql(measure_sql(self.rubric, routed_sql(self.rubric, rng), _KEEP)).to_arrow_table()

    @staticmethod
    def _split(measured: pa_arrow.Table) -> tuple[pl.DataFrame, pl.DataFrame]:
        """DuckDB's pass over a range split: the measures of the lines it judged, and the lines Python must."""
        frame = pl.from_arrow(measured)
        assert isinstance(frame, pl.DataFrame)
        return frame.filter(~pl.col("__route")).drop(_KEEP), frame.filter(pl.col("__route"))

    def _measures(self, frame: pl.DataFrame, routed: pl.DataFrame) -> pl.DataFrame:
        """The measures of every line of a range that is a JSON object (in no particular order): DuckDB's
        (``frame``), and those of the ``routed`` lines Python judged and accepted."""
        if routed.height:
            verdicts = self._judge(routed)
            self._routed.append(verdicts)
            accepted = verdicts.filter(pc.is_valid(verdicts["j"]))  # noqa: F841 - read by DuckDB's replacement scan
            more = pl.from_arrow(self.con.sql(measure_sql(self.rubric, "accepted")).to_arrow_table())
            assert isinstance(more, pl.DataFrame)
            # appended as a second chunk, not copied into one with the first (a range's measures are ~100 MB)
            frame = pl.concat([frame, more.cast(frame.schema)], rechunk=False) if frame.height else more
        return frame

    def run(self) -> None:
        row = self.con.sql(f"SELECT count(*), min(line_number), max(line_number) FROM {self.src}").fetchone()
        n, lo, hi = row or (0, None, None)
        self.lines_read = int(n)
        if not n:
            return
        schema = build_engine_schema(self.rubric)
        seen = pl.Series("__id_key", [], dtype=pl.String)  # the id keys of every object on earlier lines
        starts = range(int(lo), int(hi) + 1, self.chunk_lines)
        # DuckDB measures the next range (on a connection of its own) while Python and pandera check this one
        ahead = self.con.cursor()
        (current,) = self.con.execute("SELECT current_database()").fetchone() or ("memory",)
        ahead.execute(f'USE "{current}"')  # a cursor starts in the default database (a lake is USEd by name)
        with closing(ahead), ThreadPoolExecutor(max_workers=1) as pool:  # the pool ends before the cursor closes
            pending = pool.submit(self._measured, ahead, starts[0])
            for k in range(len(starts)):
                # split before DuckDB starts on the next range: the copy the split makes (~100 MB a range) is
                # then never held while the next range is measured, and DuckDB's table goes once copied
                frame, routed = self._split(pending.result())
                if k + 1 < len(starts):
                    pending = pool.submit(self._measured, ahead, starts[k + 1])
                frame = self._measures(frame, routed)
                seen = self._check_range(schema, frame, seen)
                del frame, routed

    def _check_range(self, schema: pa.DataFrameSchema, frame: pl.DataFrame, seen: pl.Series) -> pl.Series:
        """A range's measures checked by the schema, then its repeated ids (``seen``: the ids kept from earlier
        ranges); the ids kept in this range are added. Only a line that passes every other check keeps its id:
        a rejected line never makes a later valid one a repeat."""
        if frame.height == 0:
            return seen
        failing = self._check(schema, frame)
        ok = frame.select("line_number", "__id_key").filter(~pl.col("line_number").is_in(list(self.bad)))
        first = pl.col("line_number") == pl.col("line_number").min().over("__id_key")
        ok = ok.with_columns((~first | pl.col("__id_key").is_in(seen.implode())).alias("repeated"))
        for number in ok.filter("repeated")["line_number"]:
            self.bad.setdefault(int(number), []).append(f"field '{self.rubric.inputs.id_field}' {ID_REPEATED}")
        repeated = int(ok["repeated"].sum())
        self.valid += frame.height - failing - repeated
        return pl.concat([seen, ok.filter(~pl.col("repeated"))["__id_key"]])

    @property
    def routed(self) -> pa_arrow.Table:
        """Every line Python judged: its canonical JSON, or null when it was rejected."""
        return pa_arrow.concat_tables([_VERDICTS.empty_table(), *self._routed])

    def samples(self) -> Select:
        """The valid lines' rows of the samples table, made by the engine from the lines (after ``run``)."""
        failing = pa_arrow.table({"line_number": pa_arrow.array(sorted(self.bad), pa_arrow.int64())})
        lines = (
            f"(SELECT s.line_number, coalesce(r.j, s.raw_line) AS j FROM {self.src} s LEFT JOIN _routed r "
            "USING (line_number) WHERE (r.line_number IS NULL OR r.j IS NOT NULL) "
            "AND s.line_number NOT IN (SELECT line_number FROM _failing))"
        )
        return Select(
            values_sql(self.rubric, lines),
            [self.checkpoint_id, self.rubric.version],
            empty_samples(self.rubric),
            {"_routed": self.routed, "_failing": failing},
        )

    def _check(self, schema: pa.DataFrameSchema, frame: pl.DataFrame) -> int:
        """How many lines fail; every reason is added to ``bad``."""
        try:
            schema.validate(frame, lazy=True)
            return 0
        except pa.errors.SchemaErrors as exc:
            cases = exc.failure_cases
        numbers = frame["line_number"]
        failing = 0
        for idx, column, check in cases.select("index", "column", "check").iter_rows():
            number = int(numbers[int(idx)])
            reasons = self.bad.setdefault(number, [])
            if not reasons:
                failing += 1
            reasons.append(f"field '{column}' {check}")
        return failing

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
                [self.rubric.name, self.checkpoint_id, self.stage],
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


__all__ = ["EngineValidation", "empty_samples", "literal", "measure_sql", "routed_sql", "values_sql"]
