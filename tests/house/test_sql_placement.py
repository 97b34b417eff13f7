"""SQL lives with the tables it touches: a SQL statement (or a piece of one) is written in ``storage/``, or in a query
module of its own layer (a module named ``queries.py`` or inside a ``queries/`` package; it imports only downward,
as every module: tests/house/test_layers.py). Everywhere else, code asks those for typed results (``Warehouse.read``
and ``count``, a query module's functions) and passes no SQL between layers.

The test reads the source: every string literal (docstrings left out) that starts like SQL is counted where it
stands: none may stand outside the allowed places."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.house.test_layers import PACKAGE, _module_of

CEILING = 0  # SQL literals outside the allowed places

# Modules whose job is SQL, though not named so, each with why it is one
SQL_MODULES = {
    "eval_pipeline.ingest.engine": "the validation engine: runs the rubric's input contract in DuckDB",
    "eval_pipeline.ingest.engine_sql": "the validation engine's SQL: a rubric's input contract compiled to DuckDB",
    "eval_pipeline.runtime.event_log": "Dagster's own SQLite event log (not the warehouse): its connection settings",
    "eval_pipeline.devtools.services": "the PostgreSQL server tests and `make distributed` start: its databases",
}

_KEYWORDS = (
    "SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|WITH|ATTACH|DETACH|COPY|PRAGMA|SET|BEGIN|COMMIT|ROLLBACK|CALL|"
    "DESCRIBE|SUMMARIZE|EXPLAIN|LOAD|INSTALL|USE|CHECKPOINT|VACUUM|WHERE|AND|OR|ORDER BY|GROUP BY|JOIN|LEFT JOIN|"
    "FROM|UNION|HAVING|LIMIT|VALUES"
)
SQL = re.compile(rf"^\s*\(?\s*({_KEYWORDS})\b\s+\S", re.S)


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def sql_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every SQL-looking string literal of the module (docstrings and sentences left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.JoinedStr):
            skip |= {id(v) for v in node.values}  # the pieces of an f-string: the whole is read
    found = []
    for node in ast.walk(tree):
        text = None if id(node) in skip else _text(node)
        if text is not None and SQL.match(text) and not text.strip().endswith("."):
            found.append((getattr(node, "lineno", 0), text.strip()[:80]))
    return found


def is_query_module(module: str) -> bool:
    parts = module.split(".")
    return parts[-1] == "queries" or "queries" in parts[:-1]


def allowed(path: Path) -> bool:
    module = _module_of(path)
    parts = module.split(".")
    if len(parts) > 1 and parts[1] == "storage":
        return True
    return is_query_module(module) or module in SQL_MODULES


def outside() -> dict[str, list[tuple[int, str]]]:
    return {
        str(p.relative_to(PACKAGE.parent)): found
        for p in sorted(PACKAGE.rglob("*.py"))
        if not allowed(p) and (found := sql_literals(p))
    }


def test_no_sql_outside_storage_and_query_modules():
    found = outside()
    total = sum(len(v) for v in found.values())
    listing = "\n".join(f"{f}:{line}: {text}" for f, hits in found.items() for line, text in hits)
    assert total <= CEILING, f"{total} SQL literals outside storage/ and query modules (ceiling {CEILING}):\n{listing}"


def test_the_finder_sees_sql_and_not_sentences(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""SELECT in a docstring is prose."""\n'
        'a = f"SELECT x FROM {t} WHERE y = ?"\n'
        'b = "WHERE checkpoint_id = ?"\n'
        'c = "Select a checkpoint first."\n'
        'd = "SELECT count(*) FROM t"\n'
    )
    assert [line for line, _ in sql_literals(probe)] == [2, 3, 5]
