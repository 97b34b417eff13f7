"""Connections that can read the warehouse and write nothing, by construction.

A statement filter (``SELECT`` yes, ``COPY`` no) is not a sandbox: ``EXPLAIN ANALYZE`` runs what it explains,
and DuckDB allows a connection to write over its own database file even with external access disabled. Here
the connection has no writable file system at all: the warehouse is attached first, then DuckDB's local file
system is disabled, external access is turned off and the configuration locked. A DuckLake's Parquet files are
read through :class:`ReadOnlyFileSystem`, which opens files for reading only and only below the lake's data
folder; nothing else is reachable (not the catalog's folder, not the project).
"""

from __future__ import annotations

import os
from typing import Any

import duckdb
from fsspec.implementations.local import LocalFileSystem

from eval_pipeline.storage.tables import literal

PROTOCOL = "evalro"

# DuckDB settings every sandboxed connection starts with (before anything is attached)
BASE_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}


class ReadOnlyFileSystem(LocalFileSystem):  # type: ignore[misc]  # fsspec is untyped
    """The local disk, read-only: opening for anything but ``rb``, and every change, is refused; with ``root``,
    so is opening a file whose real path (links followed) is outside that folder."""

    protocol = (PROTOCOL,)
    root_marker = "/"

    def __init__(self, root: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.root = os.path.realpath(root) if root else None

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if mode != "rb":
            raise PermissionError("the warehouse is read-only here: nothing can be written")
        if self.root is not None:
            real = os.path.realpath(self._strip_protocol(path))
            if os.path.commonpath([real, self.root]) != self.root:  # a link inside the folder pointing out of it
                raise PermissionError(f"{path} leads outside the lake's data folder: not read")
        return super()._open(path, mode, **kwargs)

    def _inside(self, path: str) -> bool:
        if self.root is None:
            return True
        real = os.path.realpath(self._strip_protocol(path))
        return os.path.commonpath([real, self.root]) == self.root

    def ls(self, path: str, detail: bool = False, **kwargs: Any) -> Any:
        """A folder's entries, none whose real path (links followed) is outside ``root``; a folder outside it has
        none (a glob through a link to another folder lists nothing there)."""
        if not self._inside(path):
            return []
        entries = super().ls(path, detail=detail, **kwargs)
        return [e for e in entries if self._inside(e["name"] if detail else e)]

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, str) and path.startswith(f"{PROTOCOL}://"):
            path = path[len(PROTOCOL) + 3 :]
        return super()._strip_protocol(path)

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise PermissionError("the warehouse is read-only here: nothing can be changed")

    rm = rm_file = _rm = mkdir = makedirs = mv = cp_file = put_file = touch = rmdir = _refuse


def url(folder: str) -> str:
    """``folder`` as a path of the read-only file system (absolute, with a trailing slash)."""
    return f"{PROTOCOL}://{os.path.abspath(folder).rstrip('/')}/"


# Table functions that open files or servers themselves, past DuckDB's file systems (the SQLite and PostgreSQL
# scanners), that run SQL held in a string, or that change a lake: refused by name before the text is parsed
REACHING_OUT = ("sqlite_", "postgres_", "mysql_", "ducklake_")
RUNS_SQL = {"query", "query_table", "json_execute_serialized_sql", "sql_auto_complete"}
# the lake's functions that only read it
DUCKLAKE_READS = {
    "ducklake_snapshots",
    "ducklake_table_info",
    "ducklake_list_files",
    "ducklake_table_changes",
    "ducklake_table_insertions",
    "ducklake_table_deletions",
    "ducklake_current_snapshot",
    "ducklake_last_committed_snapshot",
    "ducklake_options",
}
# statements whose parsing alone reads files (IMPORT DATABASE reads a folder's schema.sql and load.sql)
READS_WHEN_PARSED = {"import", "export"}
# the same by another name (PRAGMA import_database('<dir>'), CALL export_database(...))
READS_FILES_BY_NAME = {"import_database", "export_database"}


def refuse_reaching_out(sql: str) -> None:
    """Raise ``PermissionError`` naming the first word of ``sql`` (as DuckDB's tokenizer sees it: comments and
    string literals are not words, quoted names are) that would reach past the sandbox, in any of its statements.
    Called before the text is parsed."""
    tokens = duckdb.tokenize(sql)
    words: list[str] = []
    starts: list[str] = []  # the first word of each statement
    at_start = True
    for i, (start, kind) in enumerate(tokens):
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        text = sql[start:end].strip()
        if kind == duckdb.token_type.operator and ";" in text:
            at_start = True
            continue
        if kind not in (duckdb.token_type.identifier, duckdb.token_type.keyword):
            continue
        word = text.strip('"').lower()
        words.append(word)
        if at_start:
            starts.append(word)
            at_start = False
    for first in starts:  # every statement, not only the first: "SELECT 1; IMPORT DATABASE ..." is two
        if first in READS_WHEN_PARSED:
            raise PermissionError(f"{first.upper()} DATABASE cannot run here (only queries of the warehouse)")
    for word in words:
        if word in READS_FILES_BY_NAME:
            raise PermissionError(f"{word} cannot run here: it reads files (only queries of the warehouse)")
        if word in RUNS_SQL or (word.startswith(REACHING_OUT) and word not in DUCKLAKE_READS):
            raise PermissionError(f"{word}() cannot run here: it reaches past the warehouse (only queries of it)")


def seal(con: duckdb.DuckDBPyConnection, readable: list[str]) -> None:
    """Take every file system but the read-only one away from ``con`` (its attachments stay open), allow reads
    below ``readable`` only (folders as given by :func:`url`), and lock the configuration so no statement can
    undo it."""
    con.execute("SET temp_directory = ''")  # no spilling: a query past the memory limit is an out-of-memory error
    con.execute("SET allowed_directories = ?", [readable])
    con.execute("SET enable_external_access = false")
    con.execute("SET disabled_filesystems = 'LocalFileSystem'")
    con.execute("SET lock_configuration = true")


def attach_file(path: str, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with the DuckDB file ``path`` attached read-only as the current database."""
    con = duckdb.connect(":memory:", config={**config, **BASE_CONFIG})
    try:
        con.execute(f"ATTACH {literal(path)} AS warehouse (READ_ONLY)")
        con.execute("USE warehouse")
        seal(con, [])
    except BaseException:
        con.close()
        raise
    return con


def as_text_where_needed(table: Any) -> Any:
    """``table`` with every column pandas or Python cannot hold (a union, a date past year 9999, a 128-bit
    interval) as DuckDB writes it as text; the other columns as they are."""
    bad = []
    for name, col in zip(table.column_names, table.columns, strict=True):
        try:
            col.to_pandas()
            col.to_pylist()
        except (ValueError, OverflowError, NotImplementedError, TypeError, ArithmeticError):
            bad.append(name)
        except Exception as exc:  # noqa: BLE001 - pyarrow's own (ArrowNotImplementedError, ArrowInvalid)
            if type(exc).__module__.startswith("pyarrow"):
                bad.append(name)
            else:
                raise
    if not bad:
        return table
    con = duckdb.connect(":memory:", config={"enable_external_access": False})
    try:
        con.register("result", table)
        cols = ", ".join(
            f'CAST("{c.replace(chr(34), chr(34) * 2)}" AS VARCHAR) AS "{c.replace(chr(34), chr(34) * 2)}"'
            if c in bad
            else f'"{c.replace(chr(34), chr(34) * 2)}"'
            for c in table.column_names
        )
        return con.execute(f"SELECT {cols} FROM result").to_arrow_table()
    finally:
        con.close()
