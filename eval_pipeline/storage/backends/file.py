"""A DuckDB file as the warehouse: the explicit option for one process at a time.

DuckDB lets one process open a file for writing, and refuses readers while it does. This backend therefore
makes no attempt to share: a run keeps the file open from its first warehouse step to its end (each opening
costs a replay and a checkpoint of the file), and another process that wants it waits up to ``lock_timeout_s``
and then fails with one line saying who holds it. Use the default DuckLake warehouse to read while runs write,
or to run several writers.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb

import eval_pipeline.storage.readonly as readonly
from eval_pipeline.core import settings
from eval_pipeline.storage.backend import BackendError
from eval_pipeline.storage.registry import backend
from eval_pipeline.storage.tables import CATALOG_SQL, Known, literal

T = TypeVar("T")

# The storage version a new warehouse file is written in: v1.2.0 stores text with zstd where a table asks for it
# (raw JSONL lines; tables.COMPRESSION). DuckDB 1.2 and later read it; a file made before keeps its own version.
STORAGE_VERSION = "v1.2.0"


def duckdb_config() -> dict[str, str | bool | int | float | list[str]]:
    """Bounded memory (DuckDB spills to disk past it), row order not kept, new files in STORAGE_VERSION."""
    return {
        "memory_limit": settings.duckdb_memory_limit(),
        "preserve_insertion_order": "false",
        "storage_compatibility_version": STORAGE_VERSION,
    }


def in_memory_config() -> dict[str, str | bool | int | float | list[str]]:
    """``duckdb_config`` for an in-memory database: it spills to the system's temporary folder, not to the working
    one (DuckDB's default for a database with no file)."""
    return {**duckdb_config(), "temp_directory": os.path.join(tempfile.gettempdir(), "eval_pipeline")}


class WarehouseBusy(RuntimeError):
    """Another process has the DuckDB file open."""


class FileBackend:
    """One DuckDB file. Within a run (``run_scope``) or a step (``step_scope``) one connection holds the file
    and every use gets a cursor on it; outside them each use opens and closes the file."""

    ddl_in_transaction = False
    concurrent_writers = False

    def __init__(self, path: str, lock_timeout_s: float = 120.0):
        self.spec = path
        self.lock_timeout_s = lock_timeout_s
        self._lock = threading.RLock()
        self._held: duckdb.DuckDBPyConnection | None = None
        self._scopes = 0
        self._known: Known | None = None

    def exists(self) -> bool:
        return self.spec == ":memory:" or Path(self.spec).exists()

    def describe(self) -> str:
        return self.spec

    def _open(self, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        if read_only and not self.exists():
            raise FileNotFoundError(f"warehouse {self.spec} does not exist yet: run the pipeline first (make demo)")
        if self.spec != ":memory:" and not read_only:
            Path(self.spec).parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.05
        while True:
            try:
                return duckdb.connect(self.spec, read_only=read_only, config=duckdb_config())
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise
                if time.monotonic() > deadline:
                    holder = str(exc).split("Conflicting lock is held in", 1)[-1].strip().rstrip(".")
                    raise WarehouseBusy(
                        f"the warehouse file {self.spec} is in use by another process ({holder}); a DuckDB file "
                        "serves one process at a time: use the default DuckLake warehouse to read while runs write"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock:
            held = self._held
        if held is not None:
            cursor = held.cursor()
            try:
                yield cursor
            finally:
                cursor.close()
            return
        con = self._open(read_only)
        try:
            yield con
        finally:
            con.close()

    @contextmanager
    def bulk(self) -> Iterator[None]:
        yield  # a held DuckDB file always uses every core: its small statements cost little anyway

    @contextmanager
    def writer(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.connect() as con:  # reads take no transaction of their own here: nothing to end first
            yield con

    def open_reader(self, as_of: str | None = None) -> duckdb.DuckDBPyConnection:
        if as_of is not None:
            raise ValueError("reading the warehouse as of a snapshot needs a DuckLake warehouse (EVAL_WAREHOUSE)")
        if not self.exists():
            raise FileNotFoundError(f"warehouse {self.spec} does not exist yet: run the pipeline first (make demo)")
        return readonly.attach_file(self.spec, duckdb_config())

    @contextmanager
    def run_scope(self) -> Iterator[None]:
        with self.step_scope():
            yield

    @contextmanager
    def step_scope(self) -> Iterator[None]:
        with self._lock:
            if self._held is None and self.spec != ":memory:":
                self._held = self._open()
            self._scopes += 1
        try:
            yield
        finally:
            with self._lock:
                self._scopes -= 1
                if self._scopes == 0:
                    self._close_held()

    def known(self) -> Known | None:
        """The whole catalog, read once while this process holds the file (nobody else can change it then)."""
        with self._lock:
            if self._held is None:
                return None
            if self._known is None:
                known: Known = {}
                for schema, table, column, kind in self._held.cursor().execute(CATALOG_SQL).fetchall():
                    known.setdefault((schema, table), {})[column] = kind
                self._known = known
            return self._known

    def forget(self) -> None:
        with self._lock:
            self._known = None

    def retrying(self, write: Callable[[], T]) -> T:
        return write()  # one writer: a commit never loses a race

    def keep_small(self, schema: str, table: str) -> None:
        """Nothing to do: a DuckDB file keeps small writes in its own blocks."""

    def upkeep(self, schemas: Collection[str] | None = None) -> str | None:
        return None  # one file, rewritten in place: nothing accumulates

    def maintain(self, keep_days: int) -> Iterator[str]:
        """Refused at once (not lazily): a DuckDB file keeps no snapshots or small files to tidy."""
        raise BackendError(
            "maintain is for a DuckLake warehouse (EVAL_WAREHOUSE=ducklake:...); a DuckDB file needs none"
        )

    def repair(self) -> Iterator[str]:
        """Refused: a DuckDB file keeps its rows in itself, there are no data files to lose."""
        raise BackendError("repair is for a DuckLake warehouse, whose data files live in a folder of their own")

    def attach_sql(self) -> str:
        return f"ATTACH {literal(self.spec)} AS warehouse (READ_ONLY);\nUSE warehouse;\n"

    def copy_from_file(self, path: str) -> Iterator[tuple[str, str, int]]:
        """Refused at once: a warehouse file of an earlier version is read as it is, not copied into another."""
        raise BackendError("migrate copies into a DuckLake: set EVAL_WAREHOUSE=ducklake:... (the default)")

    def stored_files(self) -> list[Path]:
        return [p for p in (Path(self.spec), Path(self.spec + ".wal")) if p.is_file()]

    def _close_held(self) -> None:
        held, self._held, self._known = self._held, None, None
        if held is not None:
            held.close()

    def close(self) -> None:
        with self._lock:
            self._scopes = 0
            self._close_held()


@backend("file", prefix="")
def open_file(spec: str, data_path: str | None, lock_timeout_s: float | None) -> FileBackend:
    """A DuckDB file: whatever spec no other backend claims (a path)."""
    return FileBackend(spec) if lock_timeout_s is None else FileBackend(spec, lock_timeout_s)
