"""One sample: its inputs, scores, every judge, metrics, ratings, raw line, and the parent's sample."""

from __future__ import annotations

from dataclasses import dataclass

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import PANEL
from eval_pipeline.core.ids import check_identifier
from eval_pipeline.core.types import Record, Row
from eval_pipeline.publish.viewer.queries.common import (
    id_column,
    records,
    tables,
)
from eval_pipeline.scoring.comparison import parent_of
from eval_pipeline.storage.warehouse import Warehouse


@dataclass
class SamplePage:
    rubric: str
    checkpoint: str
    sample_id: str
    parent: str | None
    sample: Record | None
    scores: Row | None
    parent_sample: Record | None
    parent_scores: Row | None
    judges: list[Row]  # one per judge (panel first), with its per-dimension rows
    metrics: Row | None
    ratings: list[Row]
    raw_line: str | None
    extractions: list[Row]


def sample_page(wh: Warehouse, rubric: RubricConfig | None, rubric_name: str, ckpt: str, sample_id: str) -> SamplePage:
    check_identifier(rubric_name, "rubric name")
    with wh.session() as s:
        present = tables(s, rubric_name)
        parent = parent_of(s, ckpt)  # the parent the comparison used

        def one(table: str, c: str) -> Row | None:
            if table not in present:
                return None
            key = id_column(rubric) if table == "samples" else "sample_id"
            rows = records(
                s.query_df(
                    f'SELECT * FROM "{rubric_name}"."{table}" WHERE checkpoint_id = ? AND "{key}" = ? LIMIT 1',
                    [c, sample_id],
                )
            )
            return rows[0] if rows else None

        sample = one("samples", ckpt)
        scores = one("scores", ckpt)
        metrics = one("metrics", ckpt)
        parent_sample = one("samples", parent) if parent else None
        parent_scores = one("scores", parent) if parent else None
        judge_rows, ratings, raw, extractions = _sample_rows(s, present, rubric_name, ckpt, sample_id, sample)
    judges: dict[str, Row] = {}
    for r in judge_rows:
        j = judges.setdefault(
            r["judge"], {"judge": r["judge"], "kind": r["judge_kind"], "model": r["model"], "rows": {}}
        )
        j["rows"][r["dimension"]] = r
    return SamplePage(
        rubric_name,
        ckpt,
        sample_id,
        parent,
        sample,
        scores,
        parent_sample,
        parent_scores,
        list(judges.values()),
        metrics,
        ratings,
        raw,
        extractions,
    )


def _sample_rows(
    s: Warehouse, present: set[str], rubric_name: str, ckpt: str, sample_id: str, sample: Row | None
) -> tuple[list[Row], list[Row], str | None, list[Row]]:
    """The sample's judge rows (the panel first), its people's ratings, its raw line and its extractions."""
    judge_rows = (
        records(
            s.query_df(
                f'SELECT * FROM "{rubric_name}".judge_scores WHERE checkpoint_id = ? AND sample_id = ? '
                "ORDER BY judge = ? DESC, judge, dimension",
                [ckpt, sample_id, PANEL],
            )
        )
        if "judge_scores" in present
        else []
    )
    ratings = (
        records(
            s.query_df(
                f'SELECT * FROM "{rubric_name}".human_ratings '
                "WHERE checkpoint_id = ? AND sample_id = ? ORDER BY dimension, evaluator",
                [ckpt, sample_id],
            )
        )
        if "human_ratings" in present
        else []
    )
    raw = None
    if sample is not None and "raw_outputs" in present and sample.get("line_number") is not None:
        got = s.query_rows(
            f'SELECT raw_line FROM "{rubric_name}".raw_outputs WHERE checkpoint_id = ? AND line_number = ?',
            [ckpt, int(sample["line_number"])],
        )
        raw = got[0][0] if got else None
    extractions = (
        records(
            s.query_df(
                "SELECT name, extractor, model, observations, items, status, reason "
                f'FROM "{rubric_name}".extractions WHERE checkpoint_id = ? AND sample_id = ?',
                [ckpt, sample_id],
            )
        )
        if "extractions" in present
        else []
    )
    return judge_rows, ratings, raw, extractions
