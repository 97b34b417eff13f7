"""A plain-text table of results per rubric and checkpoint, read from the warehouse."""

from __future__ import annotations

import pandas as pd

from eval_pipeline.warehouse import Warehouse


def _fmt(df: pd.DataFrame) -> str:
    return df.to_string(index=False) if not df.empty else "(no rows)"


def results_table(wh: Warehouse) -> str:
    schemas = [r[0] for r in wh.query_rows(
        "SELECT DISTINCT table_schema FROM information_schema.tables WHERE table_name = 'samples' ORDER BY 1")]
    out = []
    for schema in schemas:
        df = wh.query_df(
            f"""
            SELECT s.checkpoint_id AS checkpoint, r.lines AS lines_read, s.valid,
                   coalesce(q.quarantined, 0) AS quarantined
            FROM (SELECT checkpoint_id, count(*) AS valid FROM "{schema}".samples GROUP BY 1) s
            LEFT JOIN (SELECT checkpoint_id, count(*) AS lines FROM "{schema}".raw_outputs GROUP BY 1) r USING (checkpoint_id)
            LEFT JOIN (SELECT checkpoint_id, count(*) AS quarantined FROM main.quarantine
                       WHERE rubric = ? GROUP BY 1) q USING (checkpoint_id)
            ORDER BY 1
            """,
            [schema],
        )
        out.append(f"== {schema}\n{_fmt(df)}")
    return "\n\n".join(out)
