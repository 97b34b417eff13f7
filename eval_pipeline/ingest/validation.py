"""Validating raw lines against a rubric's declared input fields, in the engine (``engine``/``engine_schema``).

Every raw line ends either in the samples or in the quarantine with every reason: not UTF-8, malformed JSON,
not an object, wrong types, missing fields, values outside the allowed set or length, a sample id repeated
in the file (the first occurrence is kept), an empty response. The pipeline validates a checkpoint inside
the warehouse (``EngineValidation`` on ``<rubric>.raw_outputs``); ``validate_raw`` runs the same code on a
frame of raw lines in an in-memory DuckDB (tests, the CLI). ``rowwise`` keeps the earlier row-by-row pandas
implementation as the reference the benchmark and the differential test compare against.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pandera.polars as pa
import polars as pl

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import QUARANTINE_COLUMNS  # noqa: F401 (re-exported)
from eval_pipeline.ingest.engine import EngineValidation
from eval_pipeline.ingest.engine_schema import build_engine_schema
from eval_pipeline.ingest.jsonl import iter_jsonl
from eval_pipeline.ingest.rowwise import ValidationResult, empty_quarantine  # noqa: F401 (re-exported)


def build_schema(rubric: RubricConfig) -> pa.DataFrameSchema:
    """The pandera (Polars) schema of a rubric's samples: the one definition of a valid sample."""
    return build_engine_schema(rubric, pl.Series("__id_key", [], dtype=pl.String))


def _samples_frame(rubric: RubricConfig, engine: EngineValidation, chunks: list) -> pd.DataFrame:
    if chunks:
        import pyarrow as pa_arrow

        df = pa_arrow.concat_tables(chunks).to_pandas()
    else:
        df = pd.DataFrame({"checkpoint_id": pd.Series(dtype="object"), "line_number": pd.Series(dtype="int64")})
        for f in rubric.inputs.fields:
            df[f.name] = pd.Series(dtype="object")
        df["rubric_version"] = pd.Series(dtype="object")
    for f in rubric.inputs.fields:  # nullable integers and booleans keep their type through pandas
        if f.type == "integer":
            df[f.name] = df[f.name].astype("Int64")
        elif f.type == "boolean":
            df[f.name] = df[f.name].astype("boolean")
    return df


def validate_raw(
    rubric: RubricConfig, raw: pd.DataFrame, stage: str = "validate", seen_ids: set[str] | None = None
) -> ValidationResult:
    """Split a frame of raw lines (``read_jsonl``) into valid samples and quarantined rows (with reasons)."""
    ckpt = str(raw["checkpoint_id"].iloc[0]) if len(raw) else ""
    con = duckdb.connect()
    try:
        frame = raw[["source_file", "line_number", "raw_line", "decode_error"]].astype(
            {"source_file": "object", "raw_line": "object", "decode_error": "object"}
        )
        con.register("_raw_frame", frame)
        con.execute("CREATE TABLE raw AS SELECT * FROM _raw_frame")
        engine = EngineValidation(con, rubric, "raw", [], ckpt, stage=stage, prior_ids=seen_ids)
        chunks = list(engine.run())
        samples = _samples_frame(rubric, engine, chunks)
        quarantine = engine.quarantine()
    finally:
        con.close()
    if seen_ids is not None:
        seen_ids.update(engine.seen_keys())
    return ValidationResult(samples, quarantine, engine.lines_read, engine.reason_counts())


def validate_file(rubric: RubricConfig, path: Path, checkpoint_id: str) -> ValidationResult:
    """A whole JSONL file, as the pipeline validates it (in an in-memory DuckDB)."""
    con = duckdb.connect()
    try:
        con.execute(
            "CREATE TABLE raw (checkpoint_id VARCHAR, source_file VARCHAR, line_number BIGINT, raw_line VARCHAR, "
            "decode_error VARCHAR)"
        )
        for chunk in iter_jsonl(path, checkpoint_id):
            con.register("_chunk", chunk.table)
            con.execute("INSERT INTO raw SELECT * FROM _chunk")
            con.unregister("_chunk")
        engine = EngineValidation(con, rubric, "raw", [], checkpoint_id)
        chunks = list(engine.run())
        samples = _samples_frame(rubric, engine, chunks)
        quarantine = engine.quarantine()
    finally:
        con.close()
    return ValidationResult(samples, quarantine, engine.lines_read, engine.reason_counts())
