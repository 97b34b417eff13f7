"""Where the warehouse lives: a DuckDB file, or a DuckLake (a catalog in SQLite or PostgreSQL, rows as
Parquet files) attached to an in-memory DuckDB, chosen by ``EVAL_WAREHOUSE``:

    data/warehouse.duckdb                               a DuckDB file: one writing process at a time
    ducklake:sqlite:data/lake/catalog.sqlite            DuckLake, SQLite catalog: several local processes
    ducklake:postgres:dbname=evals host=db.internal     DuckLake, PostgreSQL catalog: many machines

The DuckLake rows go to ``EVAL_WAREHOUSE_DATA`` (default: ``<catalog>.files/`` beside a SQLite catalog; a
PostgreSQL catalog needs it set, on storage every machine sees). The extensions are loaded from their PyPI
packages (``duckdb-extension-ducklake``, ``-sqlite-scanner``, ``-postgres-scanner``, pinned to the duckdb
version): nothing is downloaded at run time.
"""

from __future__ import annotations

import glob
import importlib
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from eval_pipeline.core import settings
from eval_pipeline.core.tables import literal

PREFIX = "ducklake:"
ALIAS = "lake"


@dataclass(frozen=True)
class Location:
    spec: str
    kind: str  # "file" or "ducklake"
    catalog: str = ""  # for DuckLake: "sqlite:<path>" or "postgres:<conninfo>"
    data_path: str = ""

    @property
    def single_writer(self) -> bool:
        """A DuckDB file lets one process at a time write; a DuckLake lets many."""
        return self.kind == "file"

    def exists(self) -> bool:
        if self.kind == "file":
            return self.spec == ":memory:" or Path(self.spec).exists()
        if self.catalog.startswith("sqlite:"):
            return Path(self.catalog.removeprefix("sqlite:")).exists()
        return True  # a PostgreSQL catalog: asking is connecting

    def describe(self) -> str:
        """Where the data is, without credentials (a PostgreSQL conninfo may hold a password)."""
        if self.kind == "file":
            return self.spec
        if self.catalog.startswith("postgres:"):
            return f"ducklake:postgres (data in {self.data_path})"
        return f"ducklake:{self.catalog}"


def parse(spec: str, data_path: str | None = None) -> Location:
    if not spec.startswith(PREFIX):
        return Location(spec, "file")
    catalog = spec.removeprefix(PREFIX)
    if catalog.startswith("sqlite:"):
        path = Path(catalog.removeprefix("sqlite:"))
        data = data_path or str(path.with_name(path.name + ".files"))
        return Location(spec, "ducklake", f"sqlite:{path}", data)
    if catalog.startswith("postgres:"):
        if not data_path:
            raise ValueError("a DuckLake with a PostgreSQL catalog needs EVAL_WAREHOUSE_DATA (where its rows go)")
        return Location(spec, "ducklake", catalog, data_path)
    raise ValueError(
        f"EVAL_WAREHOUSE {spec!r}: use a .duckdb path, ducklake:sqlite:<file> or ducklake:postgres:<conninfo>"
    )


def extension_file(name: str) -> str:
    """The extension's file inside its PyPI package (LOADed by path: never INSTALLed, never downloaded)."""
    package = {"ducklake": "ducklake", "sqlite": "sqlite_scanner", "postgres": "postgres_scanner"}[name]
    module = importlib.import_module(f"duckdb_extension_{package}")
    found = glob.glob(
        os.path.join(os.path.dirname(module.__file__ or ""), "extensions", "*", f"{package}.duckdb_extension")
    )
    if not found:
        raise RuntimeError(f"the {package} extension file is missing from duckdb-extension-{package.replace('_', '-')}")
    return found[0]


_base: dict[tuple[str, int, bool], duckdb.DuckDBPyConnection] = {}
_base_lock = threading.Lock()
_idle = threading.local()  # per thread: cursors with the lake in use, free for the next caller


def _idle_cursors(key: tuple[str, int, bool]) -> list[duckdb.DuckDBPyConnection]:
    pools = getattr(_idle, "pools", None)
    if pools is None:
        pools = _idle.pools = {}
    return pools.setdefault(key, [])


def attached(loc: Location, config: dict, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection on which the lake is attached and in use. One in-memory database per process (and per
    read-only mode) holds the attachment; each caller gets its own cursor on it (thread-safe), taken from this
    thread's idle cursors when there is one: a new cursor's ``USE lake`` costs ~9 ms, and a step opens hundreds.
    Give it back with :func:`release`."""
    key = (loc.spec, os.getpid(), read_only)  # a forked child attaches again: never share a parent's handle
    idle = _idle_cursors(key)
    if idle:
        return idle.pop()
    with _base_lock:
        base = _base.get(key)
        if base is None:
            base = duckdb.connect(
                ":memory:", config={**config, "autoinstall_known_extensions": False, "autoload_known_extensions": False}
            )
            catalog_kind = loc.catalog.split(":", 1)[0]
            base.execute(f"LOAD '{extension_file(catalog_kind)}'")
            base.execute(f"LOAD '{extension_file('ducklake')}'")
            if catalog_kind == "sqlite":
                Path(loc.catalog.removeprefix("sqlite:")).parent.mkdir(parents=True, exist_ok=True)
                Path(loc.data_path).mkdir(parents=True, exist_ok=True)
            _attach(base, loc, read_only)
            _base[key] = base
    con = base.cursor()
    con.execute(f"USE {ALIAS}")
    return con


def release(loc: Location, read_only: bool, con: duckdb.DuckDBPyConnection, healthy: bool) -> None:
    """A cursor back to this thread's idle ones (each statement outside a transaction reads the newest
    snapshot, so a kept cursor never sees stale data); one whose caller failed is closed instead."""
    idle = _idle_cursors((loc.spec, os.getpid(), read_only))
    if healthy and len(idle) < 8:
        idle.append(con)
    else:
        con.close()


def _attach(con: duckdb.DuckDBPyConnection, loc: Location, read_only: bool) -> None:
    """ATTACH the lake. The first process to attach a new catalog creates it; one that attaches at the same
    moment may find it half made ("already exists", or the catalog busy): it waits a moment and attaches again."""
    sql = f"ATTACH {literal(PREFIX + loc.catalog)} AS {ALIAS} ({attach_options(loc, read_only)})"
    for attempt in range(20):
        try:
            con.execute(sql)
            return
        except duckdb.Error as exc:
            if attempt == 19 or not ("already exists" in str(exc) or is_retryable(exc)):
                raise
            time.sleep(0.1 + 0.1 * attempt)


def attach_options(loc: Location, read_only: bool, as_of: str | None = None) -> str:
    """A SQLite catalog in WAL mode (readers never wait on a writer) with a busy timeout (a writer waits for
    another's commit instead of failing at once; a commit that still loses the race is retried whole). ``as_of``
    (read-only): a snapshot id, or a timestamp with its zone, to see the lake as it was then."""
    options = [f"DATA_PATH {literal(loc.data_path)}"]
    if as_of is not None:
        if as_of.strip().isdigit():
            options.append(f"SNAPSHOT_VERSION {int(as_of)}")
        else:
            try:
                stamp = datetime.fromisoformat(as_of.strip().replace("Z", "+00:00"))
            except ValueError as exc:
                raise ValueError(f"--as-of {as_of!r}: give a snapshot id or an ISO-8601 timestamp") from exc
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=timezone.utc)
            options.append(f"SNAPSHOT_TIME '{stamp.isoformat()}'")
    if loc.catalog.startswith("sqlite:"):
        options += ["META_JOURNAL_MODE 'WAL'", "META_BUSY_TIMEOUT 10000"]
    if read_only:
        options.append("READ_ONLY")
    else:
        options.append(f"DATA_INLINING_ROW_LIMIT {settings.lake_inline_rows()}")
    return ", ".join(options)


def is_retryable(exc: BaseException) -> bool:
    """A commit that lost a race with another writer (the SQLite catalog was busy, or the same rows changed):
    the whole transaction can run again."""
    msg = str(exc).lower()
    return isinstance(exc, duckdb.Error) and any(
        w in msg for w in ("database is locked", "conflict", "could not serialize", "busy", "failed to commit")
    )
