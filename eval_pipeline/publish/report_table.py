"""A plain-text table of results per rubric and checkpoint, read from the warehouse."""

from __future__ import annotations

import pandas as pd

from eval_pipeline.publish.queries import counts_per_checkpoint, leaderboard_text, panel_means
from eval_pipeline.storage.warehouse import Warehouse


def _judge_means(wh: Warehouse, schema: str) -> pd.DataFrame:
    df = panel_means(wh, schema)
    if df.empty:
        return pd.DataFrame()
    wide = df.pivot(index="checkpoint", columns="dimension", values="mean").round(2)
    meta = df.groupby("checkpoint").agg(judge=("judge", "first"), missing=("missing", "sum"))
    return meta.join(wide).reset_index()


def leaderboard_table(wh: Warehouse) -> str:
    try:
        df = leaderboard_text(wh)
    except Exception:
        return "(no leaderboard yet)"
    with pd.option_context("display.width", 250):
        return str(df.to_string(index=False))


def results_table(wh: Warehouse) -> str:
    schemas = sorted({schema for schema, _ in wh.tables(["samples"])})
    out = []
    for schema in schemas:
        df = counts_per_checkpoint(wh, schema)
        judge = _judge_means(wh, schema)
        if not judge.empty:
            df = df.merge(judge, on="checkpoint", how="left")
        with pd.option_context("display.width", 250, "display.max_columns", 40):
            out.append(f"== {schema}\n{df.to_string(index=False) if not df.empty else '(no rows)'}")
    out.append("== main.leaderboard\n" + leaderboard_table(wh))
    return "\n\n".join(out)
