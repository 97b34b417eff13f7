"""Reading validated samples back from the warehouse as Python records."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.warehouse import Warehouse

JSON_TYPES = ("string_list", "object", "object_list")


def load_samples(wh: Warehouse, rubric: RubricConfig, checkpoint_id: str) -> pd.DataFrame:
    return wh.query_df(
        f'SELECT * FROM "{rubric.name}".samples WHERE checkpoint_id = ? ORDER BY line_number', [checkpoint_id]
    )


def to_records(rubric: RubricConfig, df: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per sample: declared fields with JSON columns decoded, missing values as None."""
    json_fields = {f.name for f in rubric.inputs.fields if f.type in JSON_TYPES}
    names = [f.name for f in rubric.inputs.fields]
    out = []
    for row in df[names].to_dict("records"):
        rec: dict[str, Any] = {}
        for k, v in row.items():
            if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
                rec[k] = None
            elif k in json_fields and isinstance(v, str):
                rec[k] = json.loads(v)
            elif hasattr(v, "item"):
                rec[k] = v.item()
            else:
                rec[k] = v
        rec["sample_id"] = rec.get(rubric.inputs.id_field)
        out.append(rec)
    return out
