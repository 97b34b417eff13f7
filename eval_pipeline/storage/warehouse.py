"""The warehouse: one schema per rubric, one table per asset, on the backend ``EVAL_WAREHOUSE`` names (the
default: a DuckLake on a SQLite catalog under ``data/``; see :mod:`eval_pipeline.storage.backend`).

Connections are short-lived: open, do the work, read results whole, close. Nothing holds a connection while
waiting on the judge endpoint. A partition is written by :meth:`Warehouse.replace_partition`: delete and insert
in one transaction, inserting by column name, so a re-run never duplicates rows and a failed write leaves the
previous partition in place. Asset code never knows which backend it writes to.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypedDict, TypeVar, Unpack

import duckdb
import pandas as pd
import pyarrow as pa

from eval_pipeline.core import settings
from eval_pipeline.core.ids import check_identifier
from eval_pipeline.storage.backend import WarehouseBackend
from eval_pipeline.storage.batching import Batch
from eval_pipeline.storage.ranging import RangeReads
from eval_pipeline.storage.readonly import refuse_reaching_out
from eval_pipeline.storage.registry import open_backend
from eval_pipeline.storage.staging import FileStagedWriter, PartitionWriter, TransactionWriter
from eval_pipeline.storage.tables import (
    COLUMNS_SQL,
    Filter,
    Frame,
    Known,
    PartitionKey,
    Select,
    Where,
    check_partition,
    conditions,
    count_sql,
    ensure_table,
    insert_by_name,
    partition_key,
    qualified,
    select_sql,
    transaction,
)

T = TypeVar("T")
_QUERY_STATEMENTS = {"SELECT", "EXPLAIN", "PRAGMA", "RELATION"}


HELD_QUERY_ROWS = 20_000  # a query's rows a batch holds as Arrow (more: the query is written in its turn)
INTERRUPT_GRACE_S = 2.0  # how long an interrupted query may take to stop before the command stops without it


def _interruptible(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    """``sql``'s result on ``con``, run in a thread while this one waits in steps a signal can break: DuckDB
    holds the calling thread in C for the whole query, where Python runs no signal handler, so Ctrl-C (and
    SIGTERM, which the CLI takes as Ctrl-C) waited for the query to end. On KeyboardInterrupt the query is
    interrupted (``con.interrupt()``) and the KeyboardInterrupt goes on once it stopped, or after
    ``INTERRUPT_GRACE_S``."""
    import threading

    out: list[pa.Table] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            result = con.execute(sql)
            if result is None or result.description is None:
                raise ValueError("the statement returned no rows (only queries can run here)")
            out.append(result.to_arrow_table())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread as it is
            failed.append(exc)

    worker = threading.Thread(target=run, name="eval-sql", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except KeyboardInterrupt:
        con.interrupt()
        worker.join(INTERRUPT_GRACE_S)
        raise
    if failed:
        raise failed[0]
    return out[0]


class ReadQuery(TypedDict, total=False):
    """``Warehouse.read``'s keywords, for what answers the same call (``Reader``)."""

    columns: Sequence[str]
    where: Mapping[str, Filter] | None
    order_by: Sequence[str]
    distinct: bool
    limit: int | None


class Reader(Protocol):
    """What reads one checkpoint's rows: a ``Warehouse``, or the rows of many checkpoints read at once
    (defs/assets/decisions.Prefetched) answering the same calls."""

    def read(self, schema: str, table: str, **query: Unpack[ReadQuery]) -> pd.DataFrame: ...

    def count(
        self, schema: str, table: str, where: Mapping[str, Filter] | None = None, distinct: Sequence[str] = ()
    ) -> int: ...

    def table_exists(self, schema: str, table: str) -> bool: ...


class Warehouse:
    """Access to the warehouse through its backend. Cheap to construct (nothing is opened until used); objects
    made from one another (``session``) share the backend. ``close`` lets go of what the backend holds."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        backend: WarehouseBackend | None = None,
        lock_timeout_s: float | None = None,
        read_only: bool = False,
    ):
        if backend is None:
            spec = str(path or settings.warehouse_path())
            backend = open_backend(spec, settings.warehouse_data_path(), lock_timeout_s=lock_timeout_s)
        self.backend = backend
        self.path = backend.spec
        self.read_only = read_only  # every connection read-only: nothing is created, written or locked for writing
        self._session: duckdb.DuckDBPyConnection | None = None
        self._past = False  # reads a past snapshot (as_of): the catalog this process knows is not its catalog
        self.staging_swept = False  # stale staging tables looked for (storage.staging)
        self._write_lock = threading.RLock()  # this object's writers take turns (one connection's transaction each)
        # the rows the last committed replacement of each partition wrote, through this object: a step's row count
        # for Dagster's metadata comes from its write, not from one more query (each costs a DuckLake a catalog read)
        self._written: dict[PartitionKey, int] = {}
        # what callers learnt of the warehouse and may trust for as long as this object lives (one run)
        self.memo: dict[str, object] = {}  # what readers of this warehouse object remember
        self._batch: Batch | None = None  # partition replacements held to be written together (``batched``)
        self._range: RangeReads | None = None  # reads answered for a range of checkpoints at once (``ranged``)

    def exists(self) -> bool:
        return self.backend.exists()

    def describe(self) -> str:
        return self.backend.describe()

    def current_snapshot(self) -> int | None:
        """The newest committed snapshot of a DuckLake (what a reader opened ``as_of`` it would see); None for a
        DuckDB file, which keeps no snapshots."""
        if not getattr(self.backend, "catalog_kind", ""):
            return None
        self._settle()
        rows = self.query_rows("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def close(self) -> None:
        self.backend.close()

    def upkeep(self, schemas: Collection[str] | None = None) -> str | None:
        """The backend's upkeep of the tables of ``schemas`` (all: None) when it is due (what it did, or None):
        the end of a rubric's run asks, for its own schema and ``main``."""
        self._settle()
        return self.backend.upkeep(schemas)

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- connections -----------------------------------------------------------------------

    def connect(self, read_only: bool = False, reads: Sequence[tuple[str, str]] | None = None) -> Any:
        """A connection for one unit of work (a context manager); read-only on a read-only warehouse. ``reads``:
        the only tables (schema, table) the work reads and writes none: a batch's held rows of other tables stay
        held (without it, every held row is written first)."""
        if reads is None:
            self._settle()
        for schema, table in reads or ():
            self._settle(schema, table)
        if self._range is not None and not (read_only or self.read_only):
            self._range.forget()  # it may write
        return self.backend.connect(read_only or self.read_only)

    def _reading(self) -> Any:
        """A connection for this object's own queries, which write what a batch holds only when they read it."""
        return self.backend.connect(self.read_only)

    @contextmanager
    def batched(self) -> Iterator[Warehouse]:
        """Partition replacements held and written together, table by table, when the block ends (or when
        anything reads what they hold): a step over many checkpoints (storage.batching). Nested: one batch."""
        if self._batch is not None:
            yield self
            return
        batch = self._batch = Batch(self._replace_now)
        try:
            yield self
        except BaseException:
            self._batch = None
            try:  # what its earlier checkpoints finished, written when the warehouse still takes it
                batch.flush()
            except Exception:  # noqa: BLE001 - the block's own failure is the one to report (a store gone silent)
                pass
            raise
        self._batch = None
        batch.flush()

    @contextmanager
    def ranged(self, checkpoint_ids: Sequence[str]) -> Iterator[Warehouse]:
        """Reads of one of these checkpoints' rows answered from one read of them all, table by table, until the
        block ends: a step over many checkpoints (storage.ranging). Nested, or fewer than two: as without."""
        if self._range is not None or len(checkpoint_ids) < 2:
            yield self
            return
        self._range = RangeReads(checkpoint_ids)
        try:
            yield self
        finally:
            self._range = None

    def _settle(self, schema: str | None = None, table: str | None = None, sql: str | None = None) -> None:
        """Write the held replacements first when what comes reads or writes past them: a read of a table they
        hold (``schema``, ``table``), a query whose text names one (``sql``), anything else (neither)."""
        batch = self._batch
        if not batch:
            return
        if schema is not None and table is not None:
            due = batch.holds(schema, table)
        else:
            due = sql is None or batch.named_in(sql)
        if due:
            batch.flush()

    @contextmanager
    def sandboxed_reader(self, as_of: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for queries typed by a person: it reads the warehouse and can write no file at all
        (``as_of``: a DuckLake snapshot id or a timestamp, to read the warehouse as it was then)."""
        con = self.backend.open_reader(as_of)
        try:
            yield con
        finally:
            con.close()

    def run_readonly(self, sql: str, as_of: str | None = None) -> pd.DataFrame:
        """:meth:`query_readonly` as a DataFrame."""
        return self.query_readonly(sql, as_of).to_pandas()

    def query_readonly(self, sql: str, as_of: str | None = None) -> pa.Table:
        """A person's query on the sandboxed reader. Statements that are not queries are refused with a clear
        message first; what makes it safe is the reader itself, which cannot write whatever it runs (an
        ``EXPLAIN ANALYZE`` of a ``COPY`` included)."""
        refuse_reaching_out(sql)
        statements = duckdb.extract_statements(sql) if sql.strip() else []
        if not statements:
            raise ValueError("no query given (the text holds no statement)")
        bad = [s.type.name for s in statements if s.type.name not in _QUERY_STATEMENTS]
        if bad:
            raise PermissionError(f"only queries may run here, not {', '.join(bad)} (the warehouse is read-only)")
        with self.sandboxed_reader(as_of) as con:
            try:
                return _interruptible(con, sql)
            except duckdb.OutOfMemoryException:  # the sandbox may not spill to disk: it writes no file at all
                raise MemoryError(
                    f"the query needs more than the reader's memory ({settings.duckdb_memory_limit()}, "
                    "EVAL_DUCKDB_MEMORY_LIMIT) and may not spill to disk here: select fewer rows or columns, "
                    "or raise the limit"
                ) from None

    @contextmanager
    def hold(self) -> Iterator[Warehouse]:
        """One warehouse step: its many short connections share what the backend keeps open."""
        with self.backend.step_scope():
            yield self

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Heavy work: every core for this process's warehouse connections meanwhile (see the backend)."""
        with self.backend.bulk():
            yield

    @contextmanager
    def lingering(self) -> Iterator[None]:
        """One run in this process: the backend may keep the warehouse open from one step to the next."""
        with self.backend.run_scope():
            yield

    def query_arrow(self, sql: str, params: Sequence[object] | None = None) -> pa.Table:
        """A query's result as an Arrow table (no DataFrame built: text stays in Arrow until it is taken)."""
        self._settle(sql=sql)
        if self._session is not None:
            return self._session.execute(sql, params or []).to_arrow_table()
        with self._reading() as con:
            return con.execute(sql, params or []).to_arrow_table()

    def query_df(self, sql: str, params: Sequence[object] | None = None) -> pd.DataFrame:
        self._settle(sql=sql)
        if self._session is not None:
            return self._session.execute(sql, params or []).df()
        with self._reading() as con:
            return con.execute(sql, params or []).df()

    @contextmanager
    def as_of(self, snapshot: str) -> Iterator[Warehouse]:
        """The warehouse as it was at a DuckLake snapshot (an id or a timestamp), read-only, for as long as the
        block lasts: every read of the object it gives sees that snapshot."""
        con = self.backend.open_reader(snapshot)
        try:
            view = Warehouse(backend=self.backend, read_only=True)
            view._session, view._past = con, True
            yield view
        finally:
            con.close()

    @contextmanager
    def session(self) -> Iterator[Warehouse]:
        """Many reads on one connection (opening a DuckDB file costs more than a small query)."""
        if self._past:  # already one connection, at a snapshot
            yield self
            return
        with self._reading() as con:  # its reads write what a batch holds as they need (``_settle``)
            view = Warehouse(backend=self.backend, read_only=self.read_only)
            view._session = con
            view.memo, view._batch, view._range = self.memo, self._batch, self._range
            yield view

    def query_rows(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]:
        self._settle(sql=sql)
        if self._session is not None:
            return list(self._session.execute(sql, params or []).fetchall())
        with self._reading() as con:
            return list(con.execute(sql, params or []).fetchall())

    def read(
        self,
        schema: str,
        table: str,
        *,
        columns: Sequence[str] = (),
        where: Mapping[str, Filter] | None = None,
        order_by: Sequence[str] = (),
        distinct: bool = False,
        limit: int | None = None,
    ) -> pd.DataFrame:
        """Rows of ``schema.table``: ``columns`` (every one when empty), those whose columns equal ``where``'s values
        (a list or tuple: any of its values; None: no value), ``distinct``, ordered by ``order_by``, at most
        ``limit``. Names are checked identifiers and values are bound, never spliced into the statement. A table
        nobody has made yet reads as no rows (with ``columns``, when given). Within ``ranged``, answered from one
        read of the range's checkpoints."""
        ranged = self._range
        plain = ranged is not None and not distinct and limit is None  # a read the range may answer
        found = ranged.key(schema, table, columns, where or {}, order_by) if ranged is not None and plain else None
        if ranged is not None and found is not None:
            self._settle(schema, table)  # held rows of the table written first (which forgets what was read)

            def fetch(
                cols: list[str], every: dict[str, Filter], order: tuple[str, ...], at_most: int
            ) -> pd.DataFrame | None:
                if not self.table_exists(schema, table):
                    return None
                return self.query_df(*select_sql(schema, table, cols, every, order, False, at_most))

            answer = ranged.read(*found, fetch)
            if answer is not None:
                return answer
        if not self.table_exists(schema, table):
            return pd.DataFrame(columns=list(columns))
        sql, params = select_sql(schema, table, columns, where or {}, order_by, distinct, limit)
        return self.query_df(sql, params)

    def count(
        self, schema: str, table: str, where: Mapping[str, Filter] | None = None, distinct: Sequence[str] = ()
    ) -> int:
        """How many rows of ``schema.table`` match ``where`` (as in ``read``); with ``distinct``, how many distinct
        combinations of those columns; 0 when nobody has made the table yet."""
        if not self.table_exists(schema, table):
            return 0
        sql, params = count_sql(schema, table, where or {}, distinct)
        return int(self.query_rows(sql, params)[0][0])

    def schema_exists(self, schema: str) -> bool:
        return bool(self.query_rows("SELECT 1 FROM information_schema.schemata WHERE schema_name = ?", [schema]))

    def known_tables(self) -> Known | None:
        """The tables and columns the backend remembers, or None when it asks the catalog each time."""
        return None if self._past else self.backend.known()

    def forget_tables(self) -> None:
        """Ask the catalog again from now on (a transaction that changed it was rolled back)."""
        self.backend.forget()

    def tables(self, names: Sequence[str] = (), schema: str | None = None) -> set[tuple[str, str]]:
        """The (schema, table) pairs of this warehouse's tables and views, only those named ``names`` and in
        ``schema`` when given. Asked of ``duckdb_columns()``: on a DuckLake, ``information_schema.tables`` reads
        every table's statistics once anything has been written."""
        self._settle()
        sql = "SELECT DISTINCT schema_name, table_name FROM duckdb_columns() WHERE database_name = current_database()"
        params: list[object] = []
        if names:
            sql += f" AND table_name IN ({', '.join('?' for _ in names)})"
            params += list(names)
        if schema is not None:
            sql += " AND schema_name = ?"
            params.append(schema)
        return {(r[0], r[1]) for r in self.query_rows(sql, params)}

    def columns(self, schema: str, table: str) -> dict[str, str]:
        """The table's columns and types in their order, as the catalog has them now; empty when it does not exist."""
        self._settle(schema, table)
        return dict(self.query_rows(COLUMNS_SQL, [schema, table]))

    def table_exists(self, schema: str, table: str) -> bool:
        self._settle(schema, table)
        known = self.known_tables()
        if known is not None and (schema, table) in known:
            return True
        return bool(self.tables([table], schema))

    # --- writes ------------------------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for writes, taking turns with this object's other writers, in autocommit mode (a write
        makes its own transactions); read-only on a read-only warehouse, so a write there fails."""
        self._settle()
        if self._range is not None:
            self._range.forget()
        with self._write_lock, self.connect() if self.read_only else self.backend.writer() as con:
            yield con

    def retrying(self, write: Callable[[], T]) -> T:
        """Run a whole write again when its commit lost a race with another process's (the backend knows)."""
        return self.backend.retrying(write)

    def execute(self, sql: str, params: Sequence[object] | None = None) -> None:
        def run() -> None:
            with self.writing() as con:
                con.execute(sql, params or [])

        self.retrying(run)

    def replace_partition(
        self,
        schema: str,
        table: str,
        df: pd.DataFrame,
        where: Where,
    ) -> int:
        """Atomically replace the rows matching ``where`` (column = value) with ``df``.

        Delete and insert run in one transaction and the insert is by column name,
        so a re-run replaces the partition and never duplicates it.
        """
        check_partition(schema, table, df, where)
        self.replace_partitions([(schema, table, where, [df])])
        return len(df)

    def replace_partitions(self, parts: Sequence[tuple[str, str, Where, Sequence[Frame | Select]]]) -> list[int]:
        """Each (schema, table, where, rows): the rows matching ``where`` replaced by the rows of the frames (or
        of the queries, run in the engine), every partition in one transaction, run again whole when its commit
        loses a race with another process's. A table nobody has made yet is made inside that transaction where
        the backend allows it (one commit, not two); a table to widen or heal is changed before it, outside (a
        DuckDB file refuses a commit that changed a table it wrote). The rows inserted, per part. Inside
        ``batched``, parts it can hold are held and written with the others of their tables at its end (a query's
        rows too, read out when they are few: ``HELD_QUERY_ROWS``)."""
        if self._batch is not None:
            parts = [(schema, table, where, self._held_form(frames)) for schema, table, where, frames in parts]
            counts = self._batch.take(parts, self.known_tables())
            if counts is not None:
                for (schema, table, where, _), n in zip(parts, counts):
                    self._written[partition_key(schema, table, where)] = n
                return counts
        return self._replace_now(parts)

    def _held_form(self, frames: Sequence[Frame | Select]) -> Sequence[Frame | Select]:
        """What a batch may hold of these rows: a query's rows read out as Arrow when there are at most
        ``HELD_QUERY_ROWS`` of them (a checkpoint of a range whose samples are made in the engine); a bigger result
        stays a query, written now (its text is never copied out of the engine)."""
        if not any(isinstance(f, Select) for f in frames):
            return frames
        held: list[Frame | Select] = []
        for f in frames:
            if not isinstance(f, Select):
                held.append(f)
                continue
            self._settle(sql=f.sql)
            with self._reading() as con:
                rows = f.read(con, limit=HELD_QUERY_ROWS + 1)
            if rows.num_rows > HELD_QUERY_ROWS:
                return frames
            held.append(rows)
        return held

    def _replace_now(self, parts: Sequence[tuple[str, str, Where, Sequence[Frame | Select]]]) -> list[int]:
        """``replace_partitions``, written now (``writing`` writes what a batch held first)."""

        def write() -> list[int]:
            with self.writing() as con:
                known = self.known_tables()
                made_inside = []
                for schema, table, _, frames in parts:
                    for df in frames:
                        like = df.like if isinstance(df, Select) else df
                        if self.backend.ddl_in_transaction and known is not None and (schema, table) not in known:
                            made_inside.append((schema, table, like))
                        else:
                            ensure_table(con, schema, table, like, known)
                counts = []
                try:
                    with transaction(con):
                        for schema, table, like in made_inside:
                            ensure_table(con, schema, table, like, known)
                        for schema, table, where, frames in parts:
                            target = qualified(schema, table)
                            condition, params = conditions(where)  # a value, or any of several (IN)
                            con.execute(f"DELETE FROM {target} WHERE {condition}", params)
                            n = 0
                            for df in frames:
                                if isinstance(df, Select):
                                    n += df.insert_into(con, target)
                                elif len(df) > 0:
                                    insert_by_name(con, target, df)
                                    n += len(df)
                            counts.append(n)
                except BaseException:
                    if made_inside:
                        self.forget_tables()  # the tables it made did not commit: they are not there
                    raise
                return counts

        counts = self.retrying(write)
        for (schema, table, where, _), n in zip(parts, counts):
            self._written[partition_key(schema, table, where)] = n
        return counts

    def rows_written(self, schema: str, table: str, where: Where) -> int | None:
        """The rows this object's last committed replacement of that partition wrote, or None (not written here,
        or by a writer that does not count them)."""
        return self._written.get(partition_key(schema, table, where))

    @contextmanager
    def partition_writer(
        self, *, fixed_columns: bool = False
    ) -> Iterator[PartitionWriter | TransactionWriter | FileStagedWriter]:
        """Replace partitions of several tables chunk by chunk, all visible at once; readers never see half a
        partition, and on an exception nothing changes.

        ``fixed_columns``: every chunk of a table has the columns and types of its first (Arrow chunks of one
        schema) and comes from local work, not from waiting on the network. On a DuckDB file one transaction
        then runs from the first chunk to the end (``TransactionWriter``: each row written once, memory bounded
        by DuckDB's optimistic writes); on a DuckLake the chunks go to Parquet files of the process's own, and one
        short transaction replaces the partitions from them (``FileStagedWriter``). Otherwise (chunks whose
        columns vary, such as the judge's) chunks are held in memory and written by one transaction at the end,
        retried whole when its commit loses a race; past ``staging.BUFFER_ROWS`` rows they go to staging tables
        instead, each chunk committed on its own, swapped in by one transaction at the end (``PartitionWriter``).
        """
        writer: PartitionWriter | TransactionWriter | FileStagedWriter = PartitionWriter(self)
        if fixed_columns:
            writer = FileStagedWriter(self) if self.backend.concurrent_writers else TransactionWriter(self)
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
