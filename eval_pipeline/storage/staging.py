"""Partitions written chunk by chunk and made visible at once: in one open transaction (a DuckDB file, chunks
from local work), or held in memory and written by one transaction, or, past a memory budget, through staging
tables swapped in by one transaction (a DuckLake, or chunks that wait on the network between them)."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from typing import Protocol, TypeVar

import duckdb
import pandas as pd
import pyarrow as pa

import eval_pipeline.storage.readonly as readonly
from eval_pipeline.core.processes import pid_alive
from eval_pipeline.storage.backends.file import in_memory_config
from eval_pipeline.storage.tables import (
    Frame,
    Known,
    PartitionKey,
    Select,
    Where,
    check_partition,
    column_types,
    columns_of,
    copy_to_parquet,
    ensure_columns,
    ensure_table,
    insert_by_name,
    literal,
    partition_condition,
    partition_key,
    qualified,
    transaction,
)


class Warehouse(Protocol):
    """What the partition writers use of a ``storage.warehouse.Warehouse``."""

    staging_swept: bool

    def writing(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]: ...
    def retrying(self, write: Callable[[], T]) -> T: ...
    def known_tables(self) -> Known | None: ...
    def forget_tables(self) -> None: ...
    def schema_exists(self, schema: str) -> bool: ...
    def tables(self, names: Sequence[str] = (), schema: str | None = None) -> set[tuple[str, str]]: ...
    def execute(self, sql: str, params: Sequence[object] | None = None) -> None: ...
    def replace_partitions(self, parts: Sequence[tuple[str, str, Where, Sequence[object]]]) -> list[int]: ...


T = TypeVar("T")
STAGING_SCHEMA = "staging"
# a staging table's name says which machine and process wrote it: s<host>_<pid>_<unique>
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]
BUFFER_ROWS = 50_000  # a partition writer's rows held in memory before it stages them


def drop_stale_staging(wh: Warehouse) -> None:
    """Staging tables left by a writer process of this machine that was killed, dropped once per warehouse
    object (a process of another machine sharing the catalog is never judged from here)."""
    if wh.staging_swept:
        return
    wh.staging_swept = True
    if not wh.schema_exists(STAGING_SCHEMA):
        return
    for _, name in wh.tables(schema=STAGING_SCHEMA):
        parts = name[1:].split("_")
        if len(parts) == 3 and parts[0] == _HOST:
            pid = parts[1]
        elif len(parts) == 2:  # s<pid>_<n>: named before the host was part of the name
            pid = parts[0]
        else:
            continue
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            wh.execute(f"DROP TABLE IF EXISTS {qualified(STAGING_SCHEMA, name)}")


class CheckedStream:
    """A stream of Arrow batches of one partition, each checked to be inside it as it passes (read once);
    ``rows``: how many have passed."""

    def __init__(self, stream: pa.RecordBatchReader, schema: str, table: str, where: Where):
        self._stream, self._schema, self._table, self._where = stream, schema, table, where
        self.rows = 0

    def _batches(self) -> Iterator[pa.RecordBatch]:
        for batch in self._stream:
            check_partition(self._schema, self._table, pa.Table.from_batches([batch]), self._where)
            self.rows += batch.num_rows
            yield batch

    def reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self._stream.schema, self._batches())


class PartitionWriter:
    """Chunks held in memory up to ``buffer_rows`` rows, then written in one transaction that deletes each
    partition and inserts its chunks (retried whole when its commit loses a race with another process's).
    Past ``buffer_rows`` every chunk goes to a staging table, each committed on its own (the file is released
    between chunks; a generator's chunks cannot be replayed, what is staged can), and one transaction at the
    end swaps the partitions in from staging. Small partitions, most of them, thus never create a table: on a
    DuckLake each create or drop costs every process its catalog cache (read again by its next query)."""

    def __init__(self, wh: Warehouse, buffer_rows: int | None = None):
        self._wh = wh
        self._buffer_rows = BUFFER_ROWS if buffer_rows is None else buffer_rows
        self._pending: dict[PartitionKey, list[Frame]] = {}  # (schema, table, partition) -> chunks not yet written
        self._pending_rows = 0
        self._staging = False  # past buffer_rows: every chunk is staged
        self._stages: dict[PartitionKey, str] = {}  # (schema, table, partition) -> staging table
        self._where: dict[PartitionKey, Where] = {}
        drop_stale_staging(wh)

    def write(self, schema: str, table: str, df: Frame, where: Where) -> int:
        """Take one chunk of the partition ``where`` of ``schema.table``."""
        check_partition(schema, table, df, where)
        key = partition_key(schema, table, where)
        self._where.setdefault(key, dict(where))
        if self._staging:
            self._stage(key, df)
            return len(df)
        self._pending.setdefault(key, []).append(df)
        self._pending_rows += len(df)
        if self._pending_rows > self._buffer_rows:
            self._staging = True
            for held, frames in self._pending.items():
                for frame in frames:
                    self._stage(held, frame)
            self._pending.clear()
            self._pending_rows = 0
        return len(df)

    def write_stream(self, schema: str, table: str, stream: pa.RecordBatchReader, where: Where) -> int:
        """A whole partition from a stream of Arrow batches, taken batch by batch."""
        rows = self.write(schema, table, stream.schema.empty_table(), where)  # an empty stream declares the table
        for batch in stream:
            rows += self.write(schema, table, pa.Table.from_batches([batch]), where)
        return rows

    def _stage(self, key: PartitionKey, df: Frame) -> None:
        """Append one chunk to its staging table (committed on its own)."""
        stage = self._stages.get(key)
        if stage is None:
            stage = self._stages[key] = f"s{_HOST}_{os.getpid()}_{uuid.uuid4().hex[:12]}"

        def append() -> None:
            with self._wh.writing() as con:
                ensure_table(con, STAGING_SCHEMA, stage, df)  # an empty chunk still declares the columns
                if len(df) > 0:
                    insert_by_name(con, qualified(STAGING_SCHEMA, stage), df)

        self._wh.retrying(append)

    def commit(self) -> None:
        """One transaction: each partition deleted and inserted, from memory or from its staging table."""
        if self._pending:
            self._wh.replace_partitions([(k[0], k[1], self._where[k], frames) for k, frames in self._pending.items()])
            self._pending.clear()
            self._pending_rows = 0
        if self._stages:
            self._wh.retrying(self._swap_in)

    def _swap_in(self) -> None:
        with self._wh.writing() as con, transaction(con):
            for key, stage in self._stages.items():
                schema, table, _ = key
                target, staged = qualified(schema, table), qualified(STAGING_SCHEMA, stage)
                cols = list(columns_of(con, STAGING_SCHEMA, stage).items())
                ensure_columns(con, schema, table, cols)
                where = self._where[key]
                con.execute(f"DELETE FROM {target} WHERE {partition_condition(where)}", list(where.values()))
                collist = ", ".join(f'"{c}"' for c, _ in cols)
                con.execute(f"INSERT INTO {target} ({collist}) SELECT {collist} FROM {staged}")

    def close(self) -> None:
        """Drop the staging tables (after the swap, or instead of it when the block failed)."""
        self._pending.clear()
        if not self._stages:
            return

        def drop() -> None:
            with self._wh.writing() as con:
                for stage in self._stages.values():
                    con.execute(f"DROP TABLE IF EXISTS {qualified(STAGING_SCHEMA, stage)}")

        self._wh.retrying(drop)
        self._stages.clear()


class TransactionWriter:
    """One transaction from the first chunk to the end, on a DuckDB file (one writer process, so no commit can
    lose a race), for chunks that share their columns: each table is declared and its partition deleted when
    its first chunk comes, and the chunks are inserted into the table itself. DuckDB writes a large
    transaction's row groups to the file as they fill (its optimistic writes), so memory stays bounded, and
    each row is written once: staging wrote every row twice, and each chunk's commit went through the
    write-ahead log (less than half the time on 1M raw lines). Nothing is visible before the commit; on an exception the
    transaction is rolled back and the previous partitions stay. A table cannot change its columns in the
    transaction that writes it (DuckDB refuses the commit), so a chunk whose columns differ from its table's
    first chunk is refused before anything is written."""

    def __init__(self, wh: Warehouse):
        self._wh = wh
        self._stack = ExitStack()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._columns: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._started: set[PartitionKey] = set()
        drop_stale_staging(wh)

    def write(self, schema: str, table: str, df: Frame, where: Where) -> int:
        check_partition(schema, table, df, where)
        cols = column_types(df)
        declared = self._columns.get((schema, table))
        if declared is not None and cols != declared:
            raise ValueError(
                f"a chunk of {schema}.{table} has columns {cols}, its first chunk had {declared}: chunks written "
                "in one transaction must share their columns (write through staging instead)"
            )
        con = self._con
        if con is None:
            con = self._con = self._stack.enter_context(self._wh.writing())
            con.execute("BEGIN TRANSACTION")
        target = qualified(schema, table)
        if declared is None:
            ensure_table(con, schema, table, df, self._wh.known_tables())  # before any row of it is written
            self._columns[(schema, table)] = cols
        key = partition_key(schema, table, where)
        if key not in self._started:
            self._started.add(key)
            con.execute(f"DELETE FROM {target} WHERE {partition_condition(where)}", list(where.values()))
        if len(df) > 0:
            insert_by_name(con, target, df)
        return len(df)

    def write_stream(self, schema: str, table: str, stream: pa.RecordBatchReader, where: Where) -> int:
        """A whole partition from a stream of Arrow batches, inserted by one statement (not one INSERT per chunk: a
        third of the time); every batch is checked to be inside the partition as it passes."""
        first = stream.schema.empty_table()
        self.write(schema, table, first, where)  # declares the table and deletes the partition
        checked = CheckedStream(stream, schema, table, where)
        assert self._con is not None
        insert_by_name(self._con, qualified(schema, table), checked.reader())
        return checked.rows

    def commit(self) -> None:
        if self._con is not None:
            self._con.execute("COMMIT")
            self._con = None

    def close(self) -> None:
        """Roll back what was not committed and give the connection back."""
        try:
            if self._con is not None:
                try:
                    self._con.execute("ROLLBACK")
                except duckdb.Error:
                    pass  # a failed statement may have ended the transaction already
                self._con = None
                self._wh.forget_tables()  # the tables and columns it made are gone with it
        finally:
            self._stack.close()


class FileStagedWriter:
    """For a warehouse whose commits can lose races (a DuckLake), chunks that share their columns: each written as
    it comes to a Parquet file of this writer's own temporary folder (streamed, compressed, memory bounded), then
    one short transaction replaces each partition from its files, retried whole when its commit loses a race:
    the files are still there to read again. No lake snapshot or catalog change is made for a chunk, and the
    lake's transaction is as short as one insert. The files are written by an in-memory DuckDB of the writer's
    own: staging touches neither the warehouse's connections nor its writers' turns."""

    def __init__(self, wh: Warehouse):
        self._wh = wh
        self._folder: str | None = None
        self._con: duckdb.DuckDBPyConnection | None = None
        # (schema, table, partition) -> (its files, where, an empty table of the chunks' columns)
        self._stages: dict[PartitionKey, tuple[list[str], Where, pa.Table]] = {}

    def _file(self, schema: str, table: str, df: Frame | pa.RecordBatchReader, where: Where) -> str:
        key = partition_key(schema, table, where)
        if key not in self._stages:
            like = (
                pa.Table.from_pandas(df.iloc[:0], preserve_index=False)
                if isinstance(df, pd.DataFrame)
                else df.schema.empty_table()
            )
            self._stages[key] = ([], dict(where), like)
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="eval_pipeline_stage_")
        files = self._stages[key][0]
        files.append(os.path.join(self._folder, f"{uuid.uuid4().hex}.parquet"))
        return files[-1]

    def _copy(self, rows: Frame | pa.RecordBatchReader, path: str) -> None:
        if self._con is None:
            self._con = duckdb.connect(":memory:", config={**in_memory_config(), **readonly.BASE_CONFIG})
        copy_to_parquet(self._con, rows, path)

    def write(self, schema: str, table: str, df: Frame, where: Where) -> int:
        check_partition(schema, table, df, where)
        self._copy(df, self._file(schema, table, df, where))
        return len(df)

    def write_stream(self, schema: str, table: str, stream: pa.RecordBatchReader, where: Where) -> int:
        """A whole partition from a stream of Arrow batches, staged by one statement."""
        checked = CheckedStream(stream, schema, table, where)
        self._copy(checked.reader(), self._file(schema, table, stream, where))
        return checked.rows

    def commit(self) -> None:
        parts = []
        for key, (files, where, like) in self._stages.items():
            listed = ", ".join(literal(f) for f in files)
            parts.append((key[0], key[1], where, [Select(f"SELECT * FROM read_parquet([{listed}])", [], like)]))
        if parts:
            self._wh.replace_partitions(parts)

    def close(self) -> None:
        """Remove the staged files."""
        self._stages.clear()
        con, self._con = self._con, None
        if con is not None:
            con.close()
        folder, self._folder = self._folder, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
