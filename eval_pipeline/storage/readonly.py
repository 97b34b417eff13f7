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


class ReadOnlyFileSystem(LocalFileSystem):
    """The local disk, read-only: opening for anything but ``rb``, and every change, is refused."""

    protocol = (PROTOCOL,)
    root_marker = "/"

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if mode != "rb":
            raise PermissionError("the warehouse is read-only here: nothing can be written")
        return super()._open(path, mode, **kwargs)

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, str) and path.startswith(f"{PROTOCOL}://"):
            path = path[len(PROTOCOL) + 3 :]
        return super()._strip_protocol(path)

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise PermissionError("the warehouse is read-only here: nothing can be changed")

    rm = rm_file = _rm = mkdir = makedirs = mv = cp_file = put_file = touch = rmdir = _refuse


def url(folder: str) -> str:
    """``folder`` as a path of the read-only file system (absolute, with a trailing slash)."""
    return f"{PROTOCOL}://{os.path.abspath(folder).rstrip('/')}/"


def seal(con: duckdb.DuckDBPyConnection, readable: list[str]) -> None:
    """Take every file system but the read-only one away from ``con`` (its attachments stay open), allow reads
    below ``readable`` only (folders as given by :func:`url`), and lock the configuration so no statement can
    undo it."""
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
