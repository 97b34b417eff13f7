"""Partitions written chunk by chunk into staging tables and swapped in by one transaction."""

from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Any

from eval_pipeline.core.processes import pid_alive
from eval_pipeline.core.tables import (
    Frame,
    check_partition,
    column_types,
    ensure_columns,
    ensure_table,
    partition_condition,
    qualified,
)

if TYPE_CHECKING:
    from eval_pipeline.core.warehouse import Warehouse

STAGING_SCHEMA = "staging"
_STAGE_COUNTER = itertools.count(1)


class PartitionWriter:
    def __init__(self, wh: Warehouse):
        self._wh = wh
        self._stages: dict[tuple, str] = {}  # (schema, table, partition) -> staging table
        self._where: dict[tuple, dict[str, Any]] = {}
        self._drop_stale_staging()

    def _drop_stale_staging(self) -> None:
        """Staging tables left by a writer process that was killed (named s<pid>_<n>)."""
        if not self._wh.schema_exists(STAGING_SCHEMA):
            return
        for (name,) in self._wh.query_rows(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", [STAGING_SCHEMA]
        ):
            pid = name[1:].split("_", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
                self._wh.execute(f"DROP TABLE IF EXISTS {qualified(STAGING_SCHEMA, name)}")

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
                    con.register("_incoming", df)
                    collist = ", ".join(f'"{c}"' for c, _ in column_types(df))
                    con.execute(
                        f"INSERT INTO {qualified(STAGING_SCHEMA, stage)} ({collist}) SELECT {collist} FROM _incoming"
                    )
                    con.unregister("_incoming")

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

    def drop_staging(self) -> None:
        if not self._stages:
            return

        def drop() -> None:
            with self._wh.writing() as con:
                for stage in self._stages.values():
                    con.execute(f"DROP TABLE IF EXISTS {qualified(STAGING_SCHEMA, stage)}")

        self._wh.retrying(drop)
        self._stages.clear()
