"""Reading validated samples back from the warehouse as Python records."""

from __future__ import annotations

import json

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.types import Record
from eval_pipeline.storage.warehouse import Warehouse

JSON_TYPES = ("string_list", "object", "object_list")


def load_samples(wh: Warehouse, rubric: RubricConfig, checkpoint_id: str) -> pd.DataFrame:
    return wh.read(rubric.name, Table.SAMPLES, where={"checkpoint_id": checkpoint_id}, order_by=("line_number",))


def to_records(rubric: RubricConfig, df: pd.DataFrame) -> list[Record]:
    """One dict per sample: declared fields with JSON columns decoded, missing values as None, numbers and
    booleans as Python's own. Built column by column, not row by row."""
    json_fields = {f.name for f in rubric.inputs.fields if f.type in JSON_TYPES}
    names = [f.name for f in rubric.inputs.fields]
    columns = []
    for name in names:
        series = df[name]
        values = series.tolist()  # Python's int, float, bool and str
        missing = series.isna().to_numpy()
        if missing.any():
            values = [None if m else v for v, m in zip(values, missing, strict=True)]
        if name in json_fields:
            values = [json.loads(v) if isinstance(v, str) else v for v in values]
        columns.append(values)
    id_at = names.index(rubric.inputs.id_field)
    return [{**dict(zip(names, row, strict=True)), "sample_id": row[id_at]} for row in zip(*columns, strict=True)]
