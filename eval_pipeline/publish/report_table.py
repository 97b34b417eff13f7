"""A plain-text table of results per rubric and checkpoint, read from the warehouse."""

from __future__ import annotations

import pandas as pd

from eval_pipeline.core.contracts import PANEL
from eval_pipeline.storage.warehouse import Warehouse


def _counts(wh: Warehouse, schema: str) -> pd.DataFrame:
    return wh.query_df(
        f"""
        SELECT s.checkpoint_id AS checkpoint, r.lines AS lines, s.valid, coalesce(q.quarantined, 0) AS quarantined
        FROM (SELECT checkpoint_id, count(*) AS valid FROM "{schema}".samples GROUP BY 1) s
        LEFT JOIN (SELECT checkpoint_id, count(*) AS lines FROM "{schema}".raw_outputs GROUP BY 1) r
          USING (checkpoint_id)
        LEFT JOIN (SELECT checkpoint_id, count(*) AS quarantined FROM main.quarantine WHERE rubric = ? GROUP BY 1) q
            USING (checkpoint_id)
        ORDER BY 1
        """,
        [schema],
    )


def _judge_means(wh: Warehouse, schema: str) -> pd.DataFrame:
    if not wh.table_exists(schema, "judge_scores"):
        return pd.DataFrame()
    df = wh.query_df(
        f"""
        SELECT checkpoint_id AS checkpoint, dimension, any_value(judge_kind) AS judge,
               avg(score) AS mean, sum(CASE WHEN status = 'missing' THEN 1 ELSE 0 END) AS missing
        FROM "{schema}".judge_scores
        WHERE judge = '{PANEL}' AND kind IN ('dimension', 'questionnaire_metric', 'questionnaire_total')
        GROUP BY 1, 2
        """
    )
    if df.empty:
        return df
    wide = df.pivot(index="checkpoint", columns="dimension", values="mean").round(2)
    meta = df.groupby("checkpoint").agg(judge=("judge", "first"), missing=("missing", "sum"))
    return meta.join(wide).reset_index()


def leaderboard_table(wh: Warehouse) -> str:
    try:
        df = wh.query_df(
            "SELECT rubric || CASE WHEN rubric_configured THEN '' ELSE ' (rubric file removed)' END AS rubric, "
            "checkpoint_id AS checkpoint, headline_name AS headline, round(headline, 3) AS score, "
            "'[' || round(ci_low, 3) || ', ' || round(ci_high, 3) || ']' AS ci95, "
            "gates_passed || '/' || gates_total AS gates, judge FROM main.leaderboard ORDER BY rubric, created_at"
        )
    except Exception:
        return "(no leaderboard yet)"
    with pd.option_context("display.width", 250):
        return str(df.to_string(index=False))


def results_table(wh: Warehouse) -> str:
    schemas = sorted({schema for schema, _ in wh.tables(["samples"])})
    out = []
    for schema in schemas:
        df = _counts(wh, schema)
        judge = _judge_means(wh, schema)
        if not judge.empty:
            df = df.merge(judge, on="checkpoint", how="left")
        with pd.option_context("display.width", 250, "display.max_columns", 40):
            out.append(f"== {schema}\n{df.to_string(index=False) if not df.empty else '(no rows)'}")
    out.append("== main.leaderboard\n" + leaderboard_table(wh))
    return "\n\n".join(out)
