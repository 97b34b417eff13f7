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

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import QUARANTINE_COLUMNS
from eval_pipeline.ingest.engine_schema import (
    ID_REPEATED,
    build_engine_schema,
)
from eval_pipeline.ingest.engine_sql import measure_sql, routed_sql, values_sql
from eval_pipeline.ingest.parsing import parse_line
from eval_pipeline.storage.tables import COMPRESSION, Select, literal, qualified

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
