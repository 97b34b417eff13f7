"""Warehouse views for SQL users: `main.leaderboard`, `main.latest`, `main.verdicts`, `main.ranks`.

Rebuilt from whatever rubric schemas hold a summary (so a new rubric appears
without code changes): one row per checkpoint x rubric with the headline score
and its CI, gates passed / total, and the judge used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from eval_pipeline.core import settings
from eval_pipeline.core.contracts import PANEL
from eval_pipeline.core.ids import check_identifier
from eval_pipeline.storage.tables import transaction
from eval_pipeline.storage.warehouse import Warehouse


def _schemas_with(pairs: Iterable[tuple[str, str]], tables: Sequence[str]) -> dict[str, set[str]]:
    """For each table name of ``tables``, the schemas of ``pairs`` (schema, table) that have it."""
    found: dict[str, set[str]] = {t: set() for t in tables}
    for schema, table in pairs:
        if table in found:
            found[table].add(schema)
    return found


def _view_fingerprints(wh: Warehouse) -> dict[str, str | None]:
    """The fingerprint each view of ``main`` was created with (its comment)."""
    return dict(
        wh.query_rows(
            "SELECT view_name, comment FROM duckdb_views() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND NOT internal"
        )
    )


def configured_rubrics() -> set[str]:
    """The rubrics with a config file now (names from the file names: cheap, and true even for a broken file)."""
    folder = settings.rubric_dir()
    return {p.stem for p in [*folder.glob("*.yaml"), *folder.glob("*.yml")]} if folder.is_dir() else set()


class ViewSql(NamedTuple):
    leaderboard: str  # the leaderboard's query
    latest: str  # the other views' statements, separated by ";\n"
    fingerprint: str  # of both: a view's comment says which SQL made it


_TABLES = ("summary", "gates", "judge_scores", "checkpoints", "judge_identity", "judge_usage", "verdict", "ranks")
_DONE = "views.fingerprint"  # Warehouse.memo: the views this object last found or made


def refresh_views(wh: Warehouse, configured: set[str] | None = None) -> list[str]:
    """Rebuild the views. A rubric whose results are in the warehouse but whose config file is gone stays in
    the leaderboard, marked ``rubric_configured = false``, so nobody reads it as current.

    Nothing is asked of the warehouse when the tables this object knows of give the views it last found or made
    (a step of a run that changed no schema): the views are only ever made again when a schema came or went."""
    configured = configured_rubrics() if configured is None else configured
    known = wh.known_tables()
    if known is not None and _DONE in wh.memo:
        found = _schemas_with(known, _TABLES)
        sql = _view_sql(found, configured)
        if sql is not None and sql.fingerprint == wh.memo[_DONE]:
            return sorted(found["summary"] - {"main"})
    with wh.session() as reader:
        found = _schemas_with(reader.tables(_TABLES), _TABLES)
        made = _view_fingerprints(reader)
    sql = _view_sql(found, configured)
    if sql is None:
        return []
    union, latest, fingerprint = sql
    summaries = found["summary"] - {"main"}
    if made.get("leaderboard") == fingerprint and made.get("latest") == fingerprint:
        wh.memo[_DONE] = fingerprint
        return sorted(summaries)

    def replace_views() -> None:
        with wh.writing() as con, transaction(con):
            con.execute(f"CREATE OR REPLACE VIEW main.leaderboard AS {union}")
            for statement in latest.split(";\n"):
                con.execute(statement)
            for view in ("leaderboard", "latest"):
                con.execute(f"COMMENT ON VIEW main.{view} IS '{fingerprint}'")

    wh.retrying(replace_views)
    wh.memo[_DONE] = fingerprint
    return sorted(summaries)


def _join(alias: str, sql: str | None, nulls: str) -> str:
    """``LEFT JOIN (sql) alias`` on the checkpoint, or, where the rubric has no such table (``sql`` None), a row of
    typed nulls so the leaderboard's columns are the same for every rubric."""
    return f"LEFT JOIN ({sql if sql is not None else nulls}) {alias} USING (checkpoint_id)"


def _rubric_part(r: str, found: dict[str, set[str]], configured: set[str]) -> str:
    """One rubric's leaderboard rows: its headline summary with the checkpoint, gates, judge, verdict and rank set."""
    check_identifier(r, "rubric name")
    g = _join(
        "g",
        "SELECT checkpoint_id, sum(CASE WHEN passed THEN 1 ELSE 0 END)::BIGINT AS gates_passed, count(*)::BIGINT AS "
        f'gates_total FROM "{r}".gates GROUP BY 1'
        if r in found["gates"]
        else None,
        "SELECT NULL::VARCHAR AS checkpoint_id, NULL::BIGINT AS gates_passed, NULL::BIGINT AS gates_total",
    )
    # who judged: the recorded identity (judge_identity, one row a checkpoint) where the rubric has one; a
    # warehouse judged before identities were recorded falls back to judge_scores' kind and models
    judge = None
    if r in found["judge_identity"]:
        judge = (
            "SELECT checkpoint_id, any_value(label) AS judge, any_value(models) AS judge_models, "
            f'any_value(judge_identity) AS judge_identity FROM "{r}".judge_identity GROUP BY 1'
        )
    elif r in found["judge_scores"]:
        judge = (
            "SELECT checkpoint_id, CASE WHEN any_value(judge_kind) = 'llm' THEN any_value(model) "
            "ELSE any_value(judge_kind) END AS judge, any_value(model) AS judge_models, "
            f"NULL::VARCHAR AS judge_identity FROM \"{r}\".judge_scores WHERE judge = '{PANEL}' GROUP BY 1"
        )
    j = _join(
        "j",
        judge,
        "SELECT NULL::VARCHAR AS checkpoint_id, NULL::VARCHAR AS judge, NULL::VARCHAR AS judge_models, "
        "NULL::VARCHAR AS judge_identity",
    )
    # the verdict decided once (scoring.verdict): a checkpoint judged before verdicts were stored has none
    v = _join(
        "v",
        "SELECT checkpoint_id, verdict, headline_reason AS verdict_reason, trust AS judge_trust, gates_failed, "
        f'gates_pending, last_complete_snapshot FROM "{r}".verdict'
        if r in found["verdict"]
        else None,
        "SELECT NULL::VARCHAR AS checkpoint_id, NULL::VARCHAR AS verdict, NULL::VARCHAR AS verdict_reason, "
        "NULL::VARCHAR AS judge_trust, NULL::BIGINT AS gates_failed, NULL::BIGINT AS gates_pending, "
        "NULL::BIGINT AS last_complete_snapshot",
    )
    # the rank set among the checkpoints the same judge judged (scoring.ranks), decided once for all of them
    k = _join(
        "k",
        "SELECT checkpoint_id, rank_low, rank_high, rank_set, tied_with, basis AS rank_basis, checkpoints_ranked "
        f'FROM "{r}".ranks'
        if r in found["ranks"]
        else None,
        "SELECT NULL::VARCHAR AS checkpoint_id, NULL::BIGINT AS rank_low, NULL::BIGINT AS rank_high, "
        "NULL::VARCHAR AS rank_set, NULL::VARCHAR AS tied_with, NULL::VARCHAR AS rank_basis, "
        "NULL::BIGINT AS checkpoints_ranked",
    )
    return (
        f"SELECT '{r}' AS rubric, {str(r in configured).upper()} AS rubric_configured, s.checkpoint_id, "
        "c.model, c.created_at, c.parent, s.score AS headline_name, "
        "s.mean AS headline, s.ci_low, s.ci_high, s.n, g.gates_passed, g.gates_total, "
        "j.judge, j.judge_models, j.judge_identity, v.verdict, v.verdict_reason, v.judge_trust, "
        "v.gates_failed, v.gates_pending, coalesce(v.verdict <> 'incomplete', TRUE) AS result_complete, "
        "v.last_complete_snapshot, k.rank_low, k.rank_high, k.rank_set, k.tied_with, k.rank_basis, "
        "k.checkpoints_ranked "
        f'FROM "{r}".summary s LEFT JOIN main.checkpoints c USING (checkpoint_id) {g} {j} {v} {k} '
        f"WHERE s.breakdown = 'all' AND s.headline"
    )


def _view_sql(found: dict[str, set[str]], configured: set[str]) -> ViewSql | None:
    """The leaderboard's SQL, the other views' statements and their fingerprint; None when there is nothing to
    show yet (no summary, or no checkpoints table)."""
    summaries = found["summary"] - {"main"}
    if not summaries or "main" not in found["checkpoints"]:
        return None
    parts = [_rubric_part(r, found, configured) for r in sorted(summaries)]
    union = "\nUNION ALL\n".join(parts)
    latest = (
        "CREATE OR REPLACE VIEW main.latest AS SELECT * FROM main.leaderboard WHERE checkpoint_id = "
        "(SELECT checkpoint_id FROM main.checkpoints WHERE checkpoint_id IN (SELECT checkpoint_id FROM "
        "main.leaderboard) ORDER BY created_at DESC, checkpoint_id DESC LIMIT 1)"
    )

    # what judging cost, every rubric's judge steps in one place (the console, the viewer and budgets read it)
    usage = "\nUNION ALL BY NAME\n".join(
        f"SELECT '{r}' AS rubric, * FROM \"{r}\".judge_usage" for r in sorted(found["judge_usage"] - {"main"})
    )
    if usage:
        latest += f";\nCREATE OR REPLACE VIEW main.judge_usage AS {usage}"
    decided = "\nUNION ALL BY NAME\n".join(
        f'SELECT * FROM "{r}".verdict' for r in sorted(found["verdict"] - {"main"}) if check_identifier(r, "rubric")
    )
    if decided:  # one verdict per checkpoint and rubric, every rubric's in one place
        latest += f";\nCREATE OR REPLACE VIEW main.verdicts AS {decided}"
    ranked = "\nUNION ALL BY NAME\n".join(
        f"SELECT '{r}' AS rubric, * FROM \"{r}\".ranks" for r in sorted(found["ranks"] - {"main"})
    )
    if ranked:  # every rubric's rank sets (scoring.ranks) in one place
        latest += f";\nCREATE OR REPLACE VIEW main.ranks AS {ranked}"

    # a view is created again only when its SQL changed (a rubric came or went): on a DuckLake each CREATE
    # costs every process its catalog cache
    fingerprint = hashlib.sha256(f"{union}\n{latest}".encode()).hexdigest()[:16]
    return ViewSql(union, latest, fingerprint)
