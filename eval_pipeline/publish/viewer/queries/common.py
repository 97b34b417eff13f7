"""What every page reads: tables and columns present, the score names in the rubric's order, rows as dicts."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.ids import check_identifier
from eval_pipeline.core.types import Record, Row
from eval_pipeline.storage.warehouse import Warehouse

PAGE_SIZE = 50
FILTERS = ("all", "regressed", "improved", "disagree", "missing")


def records(df: pd.DataFrame) -> list[Record]:
    """Rows as dicts with NaN/NaT turned into None (templates test ``is none``)."""
    out = []
    for row in df.to_dict("records"):
        out.append({k: (None if _is_missing(v) else v) for k, v in row.items()})
    return out


def _is_missing(v: object) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    try:
        return bool(pd.isna(v)) if not isinstance(v, list | tuple | dict) else False
    except (TypeError, ValueError):
        return False


def tables(wh: Warehouse, schema: str) -> set[str]:
    return {t for _, t in wh.tables(schema=schema)}


def columns(wh: Warehouse, schema: str, table: str) -> list[tuple[str, str]]:
    return list(wh.columns(schema, table).items())


def leaderboard(wh: Warehouse) -> list[Row]:
    with wh.session() as s:
        if not s.table_exists("main", "leaderboard"):
            return []
        df = s.query_df("SELECT * FROM main.leaderboard ORDER BY rubric, created_at NULLS LAST, checkpoint_id")
    return records(df)


def score_names(
    wh: Warehouse, rubric: str, ckpt: str, config: RubricConfig | None = None, present: set[str] | None = None
) -> list[str]:
    """The scores the rubric summarised for this checkpoint, in the rubric's order (dimensions, then derived).
    ``present``: the rubric's tables, when the caller has them already."""
    if "summary" not in (present if present is not None else tables(wh, rubric)):
        return []
    rows = wh.query_rows(
        f"SELECT DISTINCT score FROM \"{rubric}\".summary WHERE checkpoint_id = ? AND breakdown = 'all'", [ckpt]
    )
    return sorted((r[0] for r in rows), key=lambda n: (rank(config, n), n))


def score_order(config: RubricConfig) -> list[str]:
    """Every score a rubric can produce, in its order: dimensions, questionnaire scores, derived scores."""
    return [d.key for d in config.dimensions] + config.questionnaire_scores + [d.name for d in config.derived]


def rank(config: RubricConfig | None, name: str) -> int:
    if config is None:
        return 0
    order = score_order(config)
    return order.index(name) if name in order else len(order)


def id_column(rubric: RubricConfig | None) -> str:
    """The samples table keeps the rubric's id field under its own name; every later table calls it sample_id."""
    return check_identifier(rubric.inputs.id_field, "column name") if rubric else "sample_id"


def parse_json_cell(v: Any) -> Any:
    """Lists and objects are stored as JSON text; give them back as Python values for display."""
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def score_names_of(scores: dict[str, Any] | None, config: RubricConfig | None) -> list[str]:
    """The score columns of one scores row, in the rubric's order (dimensions, questionnaire, derived)."""
    if not scores:
        return []
    if config is None:
        return [k for k, v in scores.items() if isinstance(v, int | float) and not isinstance(v, bool)]
    return [n for n in score_order(config) if n in scores]


def metric_columns(metrics: Row | None) -> list[str]:
    if not metrics:
        return []
    return [k for k in metrics if k not in ("checkpoint_id", "sample_id", "rubric_version")]
