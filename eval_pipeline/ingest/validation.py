"""Validating raw lines against a rubric's declared input fields, in the engine (``engine``/``engine_schema``).

Every raw line ends either in the samples or in the quarantine with every reason: not UTF-8, malformed JSON,
not an object, wrong types, missing fields, values outside the allowed set or length, a sample id repeated
in the file (the first occurrence is kept), an empty response. The pipeline validates a checkpoint inside
the warehouse (``EngineValidation`` on ``<rubric>.raw_outputs``); ``validate_raw`` and ``validate_file`` run
the same code on raw lines in an in-memory DuckDB (tests, the CLI). ``rowwise`` keeps the earlier row-by-row
pandas implementation as the reference the benchmark and the differential test compare against.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import pandera.polars as pa
import pyarrow as pa_arrow

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.ingest.engine import RAW, EngineValidation, insert_raw, make_raw_table
from eval_pipeline.ingest.engine_schema import build_engine_schema
from eval_pipeline.ingest.jsonl import iter_jsonl


@dataclass
class ValidationResult:
    samples: pd.DataFrame
    quarantine: pd.DataFrame
    lines_read: int
    reasons: dict[str, int]


def build_schema(rubric: RubricConfig) -> pa.DataFrameSchema:
    """The pandera (Polars) schema of a rubric's samples: the one definition of a valid sample."""
    return build_engine_schema(rubric)


def _samples_frame(rubric: RubricConfig, table: pa_arrow.Table) -> pd.DataFrame:
    df = table.to_pandas()
    for f in rubric.inputs.fields:  # nullable integers and booleans keep their type through pandas
        if f.type == "integer":
            df[f.name] = df[f.name].astype("Int64")
        elif f.type == "boolean":
            df[f.name] = df[f.name].astype("boolean")
    return df


def _in_memory(
    rubric: RubricConfig, load: Callable[[duckdb.DuckDBPyConnection], None], checkpoint_id: str, stage: str
) -> ValidationResult:
    """Raw lines put into the table ``raw`` of an in-memory DuckDB by ``load``, validated as the pipeline does."""
    con = duckdb.connect()
    try:
        make_raw_table(con)
        load(con)
        engine = EngineValidation(con, rubric, RAW, checkpoint_id, stage=stage)
        engine.run()
        samples = _samples_frame(rubric, engine.samples().read(con, order_by="line_number"))
        quarantine = engine.quarantine()
    finally:
        con.close()
    return ValidationResult(samples, quarantine, engine.lines_read, engine.reason_counts())


def validate_raw(rubric: RubricConfig, raw: pd.DataFrame, stage: str = "validate") -> ValidationResult:
    """Split a frame of raw lines (``read_jsonl``) into valid samples and quarantined rows (with reasons)."""
    ckpt = str(raw["checkpoint_id"].iloc[0]) if len(raw) else ""
    frame = raw.astype({"source_file": "object", "raw_line": "object", "decode_error": "object"})
    return _in_memory(rubric, lambda con: insert_raw(con, frame), ckpt, stage)


def validate_file(rubric: RubricConfig, path: Path, checkpoint_id: str) -> ValidationResult:
    """A whole JSONL file, read and validated as the pipeline does it (in an in-memory DuckDB)."""

    def load(con: duckdb.DuckDBPyConnection) -> None:
        for chunk in iter_jsonl(path, checkpoint_id):
            insert_raw(con, chunk.table)

    return _in_memory(rubric, load, checkpoint_id, "validate")
