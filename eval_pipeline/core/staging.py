"""Partitions written chunk by chunk and made visible at once: in one open transaction (a DuckDB file, chunks
from local work) or through staging tables swapped in by one transaction (a DuckLake, or chunks that wait on
the network between them)."""

from __future__ import annotations

import itertools
import os
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import duckdb

from eval_pipeline.core.processes import pid_alive
from eval_pipeline.core.tables import (
    Frame,
    check_partition,
    column_types,
    ensure_columns,
    ensure_table,
    insert_by_name,
    partition_condition,
    qualified,
)

if TYPE_CHECKING:
    from eval_pipeline.core.warehouse import Warehouse

STAGING_SCHEMA = "staging"
_STAGE_COUNTER = itertools.count(1)


def drop_stale_staging(wh: Warehouse) -> None:
    """Staging tables left by a writer process that was killed (named s<pid>_<n>)."""
    if not wh.schema_exists(STAGING_SCHEMA):
        return
    for (name,) in wh.query_rows(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", [STAGING_SCHEMA]
    ):
        pid = name[1:].split("_", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            wh.execute(f"DROP TABLE IF EXISTS {qualified(STAGING_SCHEMA, name)}")


class PartitionWriter:
    """Staging tables: each chunk committed on its own (a DuckLake's commit may lose a race with another
    process's and is retried: the swap can be, a generator's chunks cannot), the file released between chunks."""

    def __init__(self, wh: Warehouse):
        self._wh = wh
        self._stages: dict[tuple, str] = {}  # (schema, table, partition) -> staging table
        self._where: dict[tuple, dict[str, Any]] = {}
        drop_stale_staging(wh)

    def write(self, schema: str, table: str, df: Frame, where: dict[str, Any]) -> int:
        """Stage one chunk of the partition ``where`` of ``schema.table`` (committed on its own)."""
        check_partition(schema, table, df, where)
        key = (schema, table, tuple(sorted(where.items())))
        stage = self._stages.get(key)
        if stage is None:
            stage = self._stages[key] = f"s{os.getpid()}_{next(_STAGE_COUNTER)}"
            self._where[key] = dict(where)

        def append() -> None:
            with self._wh.writing() as con:
                ensure_table(con, STAGING_SCHEMA, stage, df)  # an empty chunk still declares the columns
                if len(df) > 0:
                    insert_by_name(con, qualified(STAGING_SCHEMA, stage), df)

        self._wh.retrying(append)
        return len(df)

    def commit(self) -> None:
        """One transaction: each partition deleted and inserted from its staging table."""
        if not self._stages:
            return
        from eval_pipeline.core.warehouse import transaction

        def swap_in() -> None:
            with self._wh.writing() as con, transaction(con):
                for key, stage in self._stages.items():
                    schema, table, _ = key
                    target, staged = qualified(schema, table), qualified(STAGING_SCHEMA, stage)
                    cols = con.execute(
                        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = ? "
                        "AND table_name = ? ORDER BY ordinal_position",
                        [STAGING_SCHEMA, stage],
                    ).fetchall()
                    ensure_columns(con, schema, table, cols)
                    where = self._where[key]
                    con.execute(f"DELETE FROM {target} WHERE {partition_condition(where)}", list(where.values()))
                    collist = ", ".join(f'"{c}"' for c, _ in cols)
                    con.execute(f"INSERT INTO {target} ({collist}) SELECT {collist} FROM {staged}")

        self._wh.retrying(swap_in)

    def close(self) -> None:
        """Drop the staging tables (after the swap, or instead of it when the block failed)."""
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
    write-ahead log (1M raw lines: 8 s against 21 s). Nothing is visible before the commit; on an exception the
    transaction is rolled back and the previous partitions stay. A table cannot change its columns in the
    transaction that writes it (DuckDB refuses the commit), so a chunk whose columns differ from its table's
    first chunk is refused before anything is written."""

    def __init__(self, wh: Warehouse):
        self._wh = wh
        self._stack = ExitStack()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._columns: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._started: set[tuple] = set()
        drop_stale_staging(wh)

    def write(self, schema: str, table: str, df: Frame, where: dict[str, Any]) -> int:
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
            ensure_table(con, schema, table, df)  # before any row of this table is written in the transaction
            self._columns[(schema, table)] = cols
        key = (schema, table, tuple(sorted(where.items())))
        if key not in self._started:
            self._started.add(key)
            con.execute(f"DELETE FROM {target} WHERE {partition_condition(where)}", list(where.values()))
        if len(df) > 0:
            insert_by_name(con, target, df)
        return len(df)

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
        finally:
            self._stack.close()
