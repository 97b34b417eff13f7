"""The DuckDB warehouse: one file, one schema per rubric, one table per asset.

Connections are short-lived: open, do the work, read results whole, close.
Nothing holds a connection while waiting on the judge endpoint. A partition is
written by :meth:`Warehouse.replace_partition`: delete and insert in one
transaction, inserting by column name, so a re-run never duplicates rows and a
failed write leaves the previous partition in place.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb
import pandas as pd

from eval_pipeline.core import lake, settings
from eval_pipeline.core.ids import check_identifier

if TYPE_CHECKING:
    from eval_pipeline.core.staging import PartitionWriter, TransactionWriter
from eval_pipeline.core.tables import (
    CATALOG_SQL,
    COLUMNS_SQL,
    Frame,
    Known,
    Select,
    check_partition,
    ensure_table,
    insert_by_name,
    partition_condition,
    qualified,
)

# In-process writers are serialised: DuckDB allows one read-write process per file
# and we keep write transactions short; this lock avoids intra-process conflicts.
_WRITE_LOCK = threading.RLock()


_QUERY_STATEMENTS = {"SELECT", "EXPLAIN", "PRAGMA", "RELATION"}
# Per warehouse, the tables (and their columns) this process has seen. On a DuckLake, kept for the process: a
# lake's catalog lookups cost ~40 ms each and a step makes dozens; tables are only ever added to, never dropped,
# outside the staging schema (never cached); a write that finds a cached table gone clears the cache and runs
# again. On a DuckDB file, only while a run's hold keeps the file open (no other process can change it then):
# read whole from the catalog when first asked (~2 ms, against ~1.6 ms for each of ~70 lookups a run makes per
# rubric), forgotten when the hold lets go.
_KNOWN: dict[str, Known] = {}
# DuckDB files held open between the steps of an in-process run (Warehouse.lingering), by path: how many
# lingering blocks are open, and the connection that keeps the file open between steps
_LINGERING: dict[str, int] = {}
_HELD: dict[str, duckdb.DuckDBPyConnection] = {}
_IN_STEP: dict[str, int] = {}  # holds open now (a step has the file: never closed under it)
_WANTED: set[str] = set()  # another process waits: close the lingering hold when the step ends
_HELD_LOCK = threading.Lock()
YIELD_POLL_S = 0.1  # how often a lingering hold looks for another process waiting on the file


def wanted_marker(path: str) -> Path:
    """The file a process touches while it waits for a DuckDB file another process has open; a lingering
    hold that sees it change closes the file between steps (Warehouse.lingering)."""
    return Path(path + ".wanted")


def _signal_wanted(path: str) -> None:
    try:
        wanted_marker(path).touch()
    except OSError:  # a read-only folder: the waiter then waits for the holder's run to end, as before
        pass


def _marker_time(path: str) -> float:
    try:
        return wanted_marker(path).stat().st_mtime
    except OSError:
        return 0.0


T = TypeVar("T")


# The storage version a new warehouse file is written in: v1.2.0 stores text with zstd where a table asks for it
# (raw JSONL lines; tables.COMPRESSION). DuckDB 1.2 and later read it; a file made before keeps its own version.
STORAGE_VERSION = "v1.2.0"


def _duckdb_config() -> dict[str, str | bool | int | float | list[str]]:
    """Bound DuckDB's memory (it spills to disk past the limit) so huge checkpoints ingest in bounded RSS; a new
    file is made in STORAGE_VERSION."""
    return {
        "memory_limit": settings.duckdb_memory_limit(),
        "preserve_insertion_order": "false",
        "storage_compatibility_version": STORAGE_VERSION,
    }


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """One transaction: committed when the block ends, rolled back (and the error raised) when it fails."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass  # a COMMIT that failed has ended the transaction already: the error that matters is the first
        raise


class Warehouse:
    """Access to the warehouse: a DuckDB file or a DuckLake (eval_pipeline.core.lake). Cheap to construct;
    opens a connection per use. Asset code does not know which backend it writes to."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, lock_timeout_s: float = 120.0):
        self.path = str(path or settings.warehouse_path())
        self.location = lake.parse(self.path, settings.warehouse_data_path())
        self.lock_timeout_s = lock_timeout_s
        self._session: duckdb.DuckDBPyConnection | None = None

    def exists(self) -> bool:
        return self.location.exists()

    def describe(self) -> str:
        return self.location.describe()

    # --- connections -----------------------------------------------------------------------

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        if self.location.kind == "ducklake":
            if read_only and not self.exists():
                raise FileNotFoundError(f"warehouse {self.describe()} does not exist yet: run the pipeline first")
            con = lake.attached(self.location, _duckdb_config(), read_only)
            healthy = False
            try:
                yield con
                healthy = True
            finally:
                lake.release(self.location, read_only, con, healthy)
            return
        con = self._open_file(read_only)
        try:
            yield con
        finally:
            con.close()

    def _open_file(self, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """A connection to the DuckDB file, waiting (up to lock_timeout_s) while another process has it."""
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        if read_only and not Path(self.path).exists():
            raise FileNotFoundError(f"warehouse {self.path} does not exist yet: run the pipeline first (make demo)")
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.05
        while True:
            try:
                return duckdb.connect(self.path, read_only=read_only, config=_duckdb_config())
            except duckdb.IOException as exc:  # file locked by another process
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                _signal_wanted(self.path)  # a hold lingering between another run's steps lets go
                time.sleep(delay)
                delay = min(delay * 2, 0.25)  # a lingering hold lets go within YIELD_POLL_S: look again soon

    @contextmanager
    def sandboxed_reader(self, as_of: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for queries typed by a person: read-only, no file access outside the warehouse
        (no COPY TO, read_csv, ATTACH), no extension installs or loads, and settings locked so a query cannot
        undo any of it. (``run_readonly`` also refuses every statement but a query.) ``as_of``: a DuckLake
        snapshot id, or a timestamp, to read the warehouse as it was then (time travel)."""
        if not self.exists():
            raise FileNotFoundError(
                f"warehouse {self.describe()} does not exist yet: run the pipeline first (make demo)"
            )
        locked: dict[str, str | bool | int | float | list[str]] = {
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        }
        if self.location.kind == "ducklake":
            con = duckdb.connect(":memory:", config={**_duckdb_config(), **locked})
            catalog_kind = self.location.catalog.split(":", 1)[0]
            con.execute(f"LOAD '{lake.extension_file(catalog_kind)}'")
            con.execute(f"LOAD '{lake.extension_file('ducklake')}'")
            con.execute(
                f"ATTACH '{lake.PREFIX}{self.location.catalog}' AS {lake.ALIAS} "
                f"({lake.attach_options(self.location, read_only=True, as_of=as_of)})"
            )
            con.execute(f"USE {lake.ALIAS}")
            allowed = [str(Path(self.location.data_path).resolve()) + "/"]
            if catalog_kind == "sqlite":
                allowed.append(str(Path(self.location.catalog.removeprefix("sqlite:")).resolve().parent) + "/")
            con.execute("SET allowed_directories = ?", [allowed])
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
        else:
            if as_of is not None:
                raise ValueError("reading the warehouse as of a snapshot needs a DuckLake warehouse (EVAL_WAREHOUSE)")
            config = {**_duckdb_config(), **locked, "enable_external_access": False, "lock_configuration": True}
            con = duckdb.connect(self.path, read_only=True, config=config)
        try:
            yield con
        finally:
            con.close()

    def run_readonly(self, sql: str, as_of: str | None = None) -> pd.DataFrame:
        """A person's query: queries only (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN...), on the sandboxed reader."""
        statements = duckdb.extract_statements(sql)
        bad = [s.type.name for s in statements if s.type.name not in _QUERY_STATEMENTS]
        if bad:
            raise PermissionError(f"only queries may run here, not {', '.join(bad)} (the warehouse is read-only)")
        with self.sandboxed_reader(as_of) as con:
            return con.execute(sql).df()

    @property
    def _held_by_file(self) -> bool:
        """Whether holding means keeping a DuckDB file open (not a lake's attachment, not an in-memory database)."""
        return self.path != ":memory:" and self.location.kind != "ducklake"

    @contextmanager
    def hold(self) -> Iterator[Warehouse]:
        """Keep the database open in this process for the block: every connection opened inside it is
        then ~0.4 ms instead of ~20 ms (DuckDB re-opens, replays and checkpoints the file when its last
        connection closes). Holding the file keeps other processes out of it, so only steps that take
        turns through the warehouse pool hold it, never one that waits on the judge. Inside ``lingering``
        the database stays open after the block, for the next step of the same run."""
        if not self._held_by_file:
            yield self  # a lake's attachment stays open in the process anyway
            return
        if not _LINGERING.get(self.path):
            with self.connect():
                yield self
            return
        con = None  # opened for the first step of a lingering run, or the first after the hold let go
        while True:
            with _HELD_LOCK:
                if con is not None and self.path not in _HELD:
                    _HELD[self.path], con = con, None
                if self.path in _HELD:  # counted in the same breath, so the watcher never closes it under us
                    _IN_STEP[self.path] = _IN_STEP.get(self.path, 0) + 1
                    break
            con = self._open_file()
        if con is not None:
            con.close()
        try:
            yield self
        finally:
            with _HELD_LOCK:
                _IN_STEP[self.path] -= 1
            if self.path in _WANTED:
                self.release()

    @contextmanager
    def lingering(self) -> Iterator[None]:
        """For one run in this process (the warehouse resource's lifetime): a hold stays open from one
        warehouse step to the next (opening and checkpointing the file cost ~50-100 ms a step: 7 s of a
        5-rubric run), until a step that calls the judge starts (``release``) or the run ends. It yields to
        other processes: one that waits for the file touches ``<file>.wanted`` and a thread here closes the
        hold within ``YIELD_POLL_S``. Between steps this run holds no pool slot, so a waiting step of another
        run gets the file at once; this run's next step opens it again when its turn comes. Nested blocks share
        one hold: the outermost watches and closes it."""
        if not self._held_by_file:
            yield
            return
        with _HELD_LOCK:
            _LINGERING[self.path] = _LINGERING.get(self.path, 0) + 1
            outermost = _LINGERING[self.path] == 1
        stop = threading.Event()
        watcher = threading.Thread(target=self._yield_when_wanted, args=(stop,), daemon=True) if outermost else None
        if watcher is not None:
            watcher.start()
        try:
            yield
        finally:
            with _HELD_LOCK:
                _LINGERING[self.path] -= 1
                last = not _LINGERING[self.path]
                if last:
                    del _LINGERING[self.path]
            if watcher is not None:
                stop.set()
                watcher.join()
            if last:
                self.release()

    def _yield_when_wanted(self, stop: threading.Event) -> None:
        seen = _marker_time(self.path)
        while not stop.wait(YIELD_POLL_S):
            now = _marker_time(self.path)
            if now != seen:
                seen = now
                _WANTED.add(self.path)
                self.release()  # a step running now lets go when it ends

    def release(self) -> None:
        """Close a lingering hold unless a step of this process is inside ``hold`` now (called before a step
        that waits on the judge, when another process waits for the file, and when the run ends)."""
        with _HELD_LOCK:
            if _IN_STEP.get(self.path):
                return
            con = _HELD.pop(self.path, None)
            _WANTED.discard(self.path)
            if con is not None:
                _KNOWN.pop(self.path, None)  # another process may change the file once it is closed
        if con is not None:
            con.close()

    def query_df(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        if self._session is not None:
            return self._session.execute(sql, params or []).df()
        with self.connect() as con:
            return con.execute(sql, params or []).df()

    @contextmanager
    def session(self) -> Iterator[Warehouse]:
        """Many reads on one connection (opening a DuckDB file costs more than a small query)."""
        with self.connect() as con:
            view = Warehouse(self.path, lock_timeout_s=self.lock_timeout_s)
            view._session = con
            yield view

    def stream_df(self, sql: str, params: Sequence[Any] | None = None, rows: int = 25_000) -> Iterator[pd.DataFrame]:
        """A query's result in DataFrames of about ``rows`` rows, read from one streaming result on a
        connection of its own (one sort or scan, not one query per page); every chunk is read whole."""
        vectors = max(1, rows // 2048)
        with self.connect() as con:
            result = con.execute(sql, params or [])
            while True:
                df = result.fetch_df_chunk(vectors)
                if df.empty:
                    break
                yield df

    def query_rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        if self._session is not None:
            return self._session.execute(sql, params or []).fetchall()
        with self.connect() as con:
            return con.execute(sql, params or []).fetchall()

    def schema_exists(self, schema: str) -> bool:
        return bool(self.query_rows("SELECT 1 FROM information_schema.schemata WHERE schema_name = ?", [schema]))

    def known_tables(self) -> Known | None:
        """The tables this process has seen on a DuckLake, or the catalog of a DuckDB file while this process
        holds it between steps (see _KNOWN); None otherwise (asked each time)."""
        if self.location.kind == "ducklake":
            return _KNOWN.setdefault(self.path, {})
        if not self._held_by_file:
            return None
        with _HELD_LOCK:
            if self.path not in _HELD:
                return None
            known = _KNOWN.get(self.path)
        if known is None:
            rows = self.query_rows(CATALOG_SQL)
            known = {}
            for schema, table, column, kind in rows:
                known.setdefault((schema, table), {})[column] = kind
            with _HELD_LOCK:
                if self.path in _HELD:
                    known = _KNOWN.setdefault(self.path, known)
        return known

    def forget_tables(self) -> None:
        """Ask the catalog again from now on (a transaction that changed it was rolled back)."""
        _KNOWN.pop(self.path, None)

    def tables(self, names: Sequence[str] = (), schema: str | None = None) -> set[tuple[str, str]]:
        """The (schema, table) pairs of this warehouse's tables and views, only those named ``names`` and in
        ``schema`` when given. Asked of ``duckdb_columns()``: on a DuckLake, ``information_schema.tables`` reads
        every table's statistics once anything has been written (~200 ms against ~7 ms)."""
        sql = "SELECT DISTINCT schema_name, table_name FROM duckdb_columns() WHERE database_name = current_database()"
        params: list[Any] = []
        if names:
            sql += f" AND table_name IN ({', '.join('?' for _ in names)})"
            params += list(names)
        if schema is not None:
            sql += " AND schema_name = ?"
            params.append(schema)
        return {(r[0], r[1]) for r in self.query_rows(sql, params)}

    def columns(self, schema: str, table: str) -> dict[str, str]:
        """The table's columns and types in their order, as the catalog has them now; empty when it does not exist."""
        return dict(self.query_rows(COLUMNS_SQL, [schema, table]))

    def table_exists(self, schema: str, table: str) -> bool:
        known = self.known_tables()
        if known is not None and (schema, table) in known:
            return True
        return bool(self.tables([table], schema))

    # --- writes ------------------------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for writes, taking turns with this process's other writers."""
        with _WRITE_LOCK, self.connect() as con:
            yield con

    def retrying(self, write: Callable[[], T]) -> T:
        """Run a whole write again when its commit lost a race with another process's (a DuckLake lets
        several processes write; a DuckDB file has one writer, so this runs it once)."""
        if self.location.kind != "ducklake":
            return write()
        delay = 0.02
        refreshed = False
        for attempt in range(40):
            try:
                return write()
            except duckdb.CatalogException:
                if refreshed:
                    raise
                self.forget_tables()  # a table this process saw is gone: ask the catalog again
                refreshed = True
                continue
            except duckdb.Error as exc:
                if not lake.is_retryable(exc) or attempt == 39:
                    raise
                time.sleep(delay + random.uniform(0, delay))
                delay = min(delay * 1.5, 1.0)
        raise AssertionError("unreachable")

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        def run() -> None:
            with self.writing() as con:
                con.execute(sql, params or [])

        self.retrying(run)

    def replace_partition(
        self,
        schema: str,
        table: str,
        df: pd.DataFrame,
        where: dict[str, Any],
    ) -> int:
        """Atomically replace the rows matching ``where`` (column = value) with ``df``.

        Delete and insert run in one transaction and the insert is by column name,
        so a re-run replaces the partition and never duplicates it.
        """
        check_partition(schema, table, df, where)
        self.replace_partitions([(schema, table, where, [df])])
        return len(df)

    def replace_partitions(
        self, parts: Sequence[tuple[str, str, dict[str, Any], Sequence[Frame | Select]]]
    ) -> list[int]:
        """Each (schema, table, where, rows): the rows matching ``where`` replaced by the rows of the frames (or
        of the queries, run in the engine), every partition in one transaction, run again whole when its commit
        loses a race with another process's. Tables and columns are made first, outside it: DuckDB refuses a
        commit that changed a table it wrote. The rows inserted, per part."""

        def write() -> list[int]:
            with self.writing() as con:
                known = self.known_tables()
                for schema, table, _, frames in parts:
                    for df in frames:
                        ensure_table(con, schema, table, df.like if isinstance(df, Select) else df, known)
                counts = []
                with transaction(con):
                    for schema, table, where, frames in parts:
                        target = qualified(schema, table)
                        con.execute(f"DELETE FROM {target} WHERE {partition_condition(where)}", list(where.values()))
                        n = 0
                        for df in frames:
                            if isinstance(df, Select):
                                n += df.insert_into(con, target)
                            elif len(df) > 0:
                                insert_by_name(con, target, df)
                                n += len(df)
                        counts.append(n)
                return counts

        return self.retrying(write)

    @contextmanager
    def partition_writer(self, *, fixed_columns: bool = False) -> Iterator[PartitionWriter | TransactionWriter]:
        """Replace partitions of several tables chunk by chunk, all visible at once; readers never see half a
        partition, and on an exception nothing changes.

        ``fixed_columns``: every chunk of a table has the columns and types of its first (Arrow chunks of one
        schema) and comes from local work, not from waiting on the network. On a DuckDB file one transaction
        then runs from the first chunk to the end (``TransactionWriter``: each row written once, memory bounded
        by DuckDB's optimistic writes). Otherwise (a DuckLake, or chunks whose columns vary, such as the
        judge's) chunks are held in memory and written by one transaction at the end, retried whole when its
        commit loses a race; past ``staging.BUFFER_ROWS`` rows they go to staging tables instead, each chunk
        committed on its own, swapped in by one transaction at the end (``PartitionWriter``).
        """
        from eval_pipeline.core.staging import PartitionWriter, TransactionWriter

        writer = TransactionWriter(self) if self.location.single_writer and fixed_columns else PartitionWriter(self)
        try:
            yield writer
            writer.commit()
        finally:
            writer.close()

    def upsert_rows(self, schema: str, table: str, df: pd.DataFrame, key: Sequence[str]) -> int:
        """Replace rows whose key columns match a row of ``df``, then insert ``df`` (one transaction)."""
        if df.empty:
            return 0
        for col in key:
            check_identifier(col, "column name")
        target = qualified(schema, table)
        match = " AND ".join(f't."{c}" = i."{c}"' for c in key)

        def write() -> None:
            with self.writing() as con:
                ensure_table(con, schema, table, df, self.known_tables())
                with transaction(con):
                    con.register("_incoming", df)
                    con.execute(f"DELETE FROM {target} t WHERE EXISTS (SELECT 1 FROM _incoming i WHERE {match})")
                    con.unregister("_incoming")
                    insert_by_name(con, target, df)

        self.retrying(write)
        return len(df)
