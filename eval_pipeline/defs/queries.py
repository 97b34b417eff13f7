"""The orchestration layer's SQL: the reads of several tables at once that assets make, as typed functions
(tests/house/test_sql_placement.py keeps SQL here, in other query modules or in storage/)."""

from __future__ import annotations

import pandas as pd

from eval_pipeline.core.contracts import PANEL, Table
from eval_pipeline.storage.tables import qualified
from eval_pipeline.storage.warehouse import Warehouse


def rated_panel_scores(wh: Warehouse, rubric: str) -> pd.DataFrame:
    """The panel's judge_scores rows of the samples people rated, of every checkpoint (agreement needs no other: a
    100k-sample checkpoint has about 1,000 rated)."""
    scores, ratings = qualified(rubric, Table.JUDGE_SCORES), qualified(rubric, Table.HUMAN_RATINGS)
    return wh.query_df(
        f"SELECT j.* FROM {scores} j WHERE j.judge = ? AND (j.checkpoint_id, j.sample_id) "
        f"IN (SELECT DISTINCT checkpoint_id, sample_id FROM {ratings})",
        [PANEL],
    )


def headline_trend(wh: Warehouse, rubric: str, headline: str) -> pd.DataFrame:
    """The headline score of every checkpoint in the order they were made: ``checkpoint``, ``score``, ``mean``,
    ``ci_low``, ``ci_high``."""
    return wh.query_df(
        f"""SELECT s.checkpoint_id AS checkpoint, s.score, s.mean, s.ci_low, s.ci_high
            FROM {qualified(rubric, Table.SUMMARY)} s JOIN main.checkpoints c USING (checkpoint_id)
            WHERE s.breakdown = 'all' AND s.score = ? ORDER BY c.created_at, s.checkpoint_id""",
        [headline],
    )


def spent_by_runs(wh: Warehouse, run_ids: list[str]) -> float:
    """What the judge steps of runs ``run_ids`` recorded as spent (``main.judge_usage``), summed in the engine."""
    marks = ", ".join("?" for _ in run_ids)
    rows = wh.query_rows(f"SELECT coalesce(sum(cost), 0) FROM main.judge_usage WHERE run_id IN ({marks})", run_ids)
    return float(rows[0][0] or 0.0)


def samples_per_checkpoint(wh: Warehouse, rubric: str, checkpoints: list[str]) -> dict[str, int]:
    """How many valid samples each of these checkpoints has (one query)."""
    if not checkpoints or not wh.table_exists(rubric, Table.SAMPLES):
        return {}
    marks = ", ".join("?" for _ in checkpoints)
    rows = wh.query_rows(
        f"SELECT checkpoint_id, count(*) FROM {qualified(rubric, Table.SAMPLES)} "
        f"WHERE checkpoint_id IN ({marks}) GROUP BY checkpoint_id",
        checkpoints,
    )
    return {str(c): int(n) for c, n in rows}
