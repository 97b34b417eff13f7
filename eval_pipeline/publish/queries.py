"""The publish layer's SQL: the aggregates the report, the results table and the export show, as typed functions
over the warehouse (tests/house/test_sql_placement.py keeps SQL here or in storage/)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from eval_pipeline.core.contracts import PANEL, Table
from eval_pipeline.storage.tables import Filter, conditions, literal, qualified
from eval_pipeline.storage.warehouse import Warehouse


def counts_per_checkpoint(wh: Warehouse, rubric: str) -> pd.DataFrame:
    """Per checkpoint of ``rubric``: its lines, valid samples and quarantined lines (``checkpoint``, ``lines``,
    ``valid``, ``quarantined``), in checkpoint order."""
    samples, raw = qualified(rubric, Table.SAMPLES), qualified(rubric, Table.RAW_OUTPUTS)
    return wh.query_df(
        f"""
        SELECT s.checkpoint_id AS checkpoint, r.lines AS lines, s.valid, coalesce(q.quarantined, 0) AS quarantined
        FROM (SELECT checkpoint_id, count(*) AS valid FROM {samples} GROUP BY 1) s
        LEFT JOIN (SELECT checkpoint_id, count(*) AS lines FROM {raw} GROUP BY 1) r
          USING (checkpoint_id)
        LEFT JOIN (SELECT checkpoint_id, count(*) AS quarantined FROM main.quarantine WHERE rubric = ? GROUP BY 1) q
            USING (checkpoint_id)
        ORDER BY 1
        """,
        [rubric],
    )


def panel_means(wh: Warehouse, rubric: str) -> pd.DataFrame:
    """Per checkpoint and dimension (questionnaire metrics and totals included) of ``rubric``: the panel's mean
    score, the judge's kind and how many of its scores are missing (``checkpoint``, ``dimension``, ``judge``,
    ``mean``, ``missing``); no rows before judge_scores exists."""
    if not wh.table_exists(rubric, Table.JUDGE_SCORES):
        return pd.DataFrame(columns=["checkpoint", "dimension", "judge", "mean", "missing"])
    return wh.query_df(
        f"""
        SELECT checkpoint_id AS checkpoint, dimension, any_value(judge_kind) AS judge,
               avg(score) AS mean, sum(CASE WHEN status = 'missing' THEN 1 ELSE 0 END) AS missing
        FROM {qualified(rubric, Table.JUDGE_SCORES)}
        WHERE judge = ? AND kind IN ('dimension', 'questionnaire_metric', 'questionnaire_total')
        GROUP BY 1, 2
        """,
        [PANEL],
    )


# the leaderboard's rubric as people read it: a rubric whose file is gone says so
_RUBRIC_SHOWN = "rubric || CASE WHEN rubric_configured THEN '' ELSE ' (rubric file removed)' END AS rubric"


def leaderboard_rows(wh: Warehouse) -> pd.DataFrame:
    """The leaderboard as the report shows it: per rubric and checkpoint its headline with the 95 % CI, gates passed,
    verdict, judge and the judge's trust, in the order the checkpoints were made."""
    return wh.query_df(
        f"SELECT {_RUBRIC_SHOWN}, checkpoint_id AS checkpoint, model, headline_name AS headline, headline AS score, "
        "ci_low, ci_high, rank_set AS rank, gates_passed, gates_total, verdict, judge_trust, judge "
        "FROM main.leaderboard ORDER BY rubric, created_at"
    )


def leaderboard_text(wh: Warehouse) -> pd.DataFrame:
    """The leaderboard as the console's results table prints it: the stored verdict first (a checkpoint with the best
    score may have regressed), score and CI rounded to 3 places, gates as passed/total, the judge's trust."""
    return wh.query_df(
        f"SELECT {_RUBRIC_SHOWN}, checkpoint_id AS checkpoint, upper(coalesce(verdict, 'not decided')) AS verdict, "
        "headline_name AS headline, round(headline, 3) AS score, "
        "'[' || round(ci_low, 3) || ', ' || round(ci_high, 3) || ']' AS ci95, "
        "gates_passed || '/' || gates_total AS gates, coalesce(rank_set, '') AS rank, "
        "coalesce(judge_trust, '') AS judge_trust, judge FROM main.leaderboard ORDER BY rubric, created_at"
    )


def judge_usage_totals(
    wh: Warehouse, checkpoint_id: str, rubrics: list[str], run_ids: list[str] | None
) -> tuple[Any, ...]:
    """What judging ``checkpoint_id`` for ``rubrics`` cost in ``run_ids`` (all its rows when None), summed over
    ``main.judge_usage``: calls, cache hits, prompt and completion tokens, the slowest step's latency p50 and p90,
    cost, steps with calls but no price, currency, prompts not asked for the budget, time-out cuts and the lowest
    concurrency a cut settled on, what the batch steps' calls would have cost online and cost, and the prompts
    waiting on judge batches (0 and None in a table from before they were recorded)."""
    where: dict[str, Filter] = {"checkpoint_id": checkpoint_id, "rubric": tuple(rubrics)}
    if run_ids:
        where["run_id"] = tuple(run_ids)
    condition, params = conditions(where)
    have = wh.columns("main", "judge_usage")
    cuts = "sum(timeout_cuts), min(nullif(final_concurrency, 0))" if "timeout_cuts" in have else "0, NULL"
    batch = (
        "sum(online_cost) FILTER (WHERE mode = 'batch'), sum(cost) FILTER (WHERE mode = 'batch'), sum(pending)"
        if "mode" in have
        else "NULL, NULL, 0"
    )
    return wh.query_rows(
        "SELECT sum(calls), sum(cache_hits), sum(prompt_tokens), sum(completion_tokens), "
        "max(latency_p50_ms), max(latency_p90_ms), sum(cost), "
        "count(*) FILTER (WHERE cost IS NULL AND calls > 0), "
        f"any_value(currency), sum(not_asked_budget), {cuts}, {batch} FROM main.judge_usage WHERE {condition}",
        params,
    )[0]


def judge_was_asked(wh: Warehouse, checkpoint_ids: list[str]) -> bool:
    """Whether any judge of any rubric was asked anything for these checkpoints, from the cache or waiting on a
    batch included (``main.judge_usage``): one query, where none was (an offline judge) none is asked per
    checkpoint."""
    if not checkpoint_ids or not wh.table_exists("main", "judge_usage"):
        return False
    pending = " OR pending > 0" if "pending" in wh.columns("main", "judge_usage") else ""
    condition, params = conditions({"checkpoint_id": tuple(checkpoint_ids)})
    sql = f"SELECT count(*) FROM main.judge_usage WHERE ({condition}) AND (calls > 0 OR cache_hits > 0{pending})"
    return bool(wh.query_rows(sql, params)[0][0])


def checkpoint_keyed_tables(wh: Warehouse) -> set[tuple[str, str]]:
    """Every (schema, table) of the warehouse with a ``checkpoint_id`` column (working tables, ``_...``, left out)."""
    rows = wh.query_rows(
        "SELECT DISTINCT schema_name, table_name FROM duckdb_columns() "
        "WHERE database_name = current_database() AND column_name = 'checkpoint_id'"
    )
    return {(str(schema), str(table)) for schema, table in rows if not str(table).startswith("_")}


MAIN_TABLES = {  # the shared tables' rows that belong to a checkpoint of the chosen rubrics
    "checkpoints": "SELECT * FROM main.checkpoints WHERE checkpoint_id = {ck}",
    "quarantine": "SELECT * FROM main.quarantine WHERE checkpoint_id = {ck} AND rubric IN ({rubrics})",
    "judge_usage": "SELECT * FROM main.judge_usage WHERE checkpoint_id = {ck} AND rubric IN ({rubrics})",
}


class CheckpointSnapshot:
    """One checkpoint's rows, read on one sandboxed reader inside one transaction (every table at one snapshot)."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, checkpoint_id: str, rubrics: list[str], keyed: set[tuple[str, str]]
    ):
        self.con, self.rubrics, self.keyed = con, rubrics, keyed
        self.ck = literal(checkpoint_id)  # the sandboxed reader takes no parameters in every statement it runs

    def verdicts(self) -> dict[str, dict[str, str]]:
        """Per rubric with a stored verdict of the checkpoint: its verdict, reason and judge trust."""
        out = {}
        for r in self.rubrics:
            if (r, Table.VERDICT) in self.keyed:
                table = qualified(r, Table.VERDICT)
                got = self.con.execute(
                    f"SELECT verdict, headline_reason, trust FROM {table} WHERE checkpoint_id = {self.ck}"
                ).fetchall()
                if got:
                    out[r] = {"verdict": got[0][0], "because": got[0][1], "judge_trust": got[0][2]}
        return out

    def tables(self) -> Iterator[tuple[str, str, pa.Table]]:
        """(schema, table, the checkpoint's rows) of every rubric table, then of the shared tables, one at a time."""
        for r in self.rubrics:
            for schema, table in sorted(self.keyed):
                if schema == r:
                    sql = f"SELECT * FROM {qualified(r, table)} WHERE checkpoint_id = {self.ck}"
                    yield r, table, self.con.execute(sql).to_arrow_table()
        rubrics = ", ".join(literal(r) for r in self.rubrics)
        for table, sql in MAIN_TABLES.items():
            if ("main", table) in self.keyed:
                yield "main", table, self.con.execute(sql.format(ck=self.ck, rubrics=rubrics)).to_arrow_table()


@contextmanager
def checkpoint_snapshot(
    wh: Warehouse, checkpoint_id: str, rubrics: list[str], keyed: set[tuple[str, str]]
) -> Iterator[CheckpointSnapshot]:
    """The checkpoint's rows of ``rubrics`` (and the shared tables), all at one snapshot, for as long as the block
    lasts."""
    with wh.sandboxed_reader() as con:
        con.execute("BEGIN TRANSACTION")
        yield CheckpointSnapshot(con, checkpoint_id, rubrics, keyed)
        con.execute("COMMIT")
