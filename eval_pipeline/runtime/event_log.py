"""Dagster's SQLite event log with its connections kept (``deploy/dagster.yaml`` names it).

Dagster's ``SqliteEventLogStorage`` builds a new SQLAlchemy engine, opens the database file and closes it again for
every statement it runs: each event a step stores (start, output, materialization, check, success: about eight a
step) and each question a step asks (does this partition exist, is the pool slot free, is there such a table).
``make demo`` stored 1,791 events and asked ~3,000 questions for 234 steps; the storage took 27 s of its 57 s. Here
each database (a run's shard, the index) keeps one engine and one connection for the process, for the few shards
touched last; every statement still runs in its own transaction, committed before the next event, so other processes
(the webserver, the daemon, a second run) read the same database as with Dagster's class. What is committed may wait
in a run's write-ahead log until SQLite checkpoints it into <run>.db (at ~1,000 pages, and when the run ends: its
connection is closed then, so a finished run is one file): Dagster's watcher, which streams a running run's events
to the webserver, woke on writes to <run>.db only, so this storage's watcher (``RunWatchdog``) wakes on writes to
the WAL as well (checkpointing after every event instead cost a 78-step run ~0.5 s of its ~1.2 s storing events).
The tables of the index, which a step looks up before every partition question, are remembered once they exist, and
so are the asset keys table's columns. Its connections run at ``synchronous=NORMAL`` (``_synchronous_normal``: what
that changes against Dagster's FULL).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dagster import DagsterEventType, Field, StringSource
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool
from watchdog.events import FileSystemEvent
from watchdog.observers import Observer

from eval_pipeline.runtime.dagster_private import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    ConfigurableClassData,
    EventHandlerFn,
    EventLogEntry,
    SqliteEventLogStorage,
    SqliteEventLogStorageWatchdog,
    create_engine,
    event_logs_directory,
)

KEPT_SHARDS = 8  # run shards whose connection stays open (the index's always does)
_RUN_ENDED = {DagsterEventType.RUN_SUCCESS, DagsterEventType.RUN_FAILURE, DagsterEventType.RUN_CANCELED}


def _synchronous_normal(dbapi_connection: Any, _record: Any) -> None:
    """WAL at ``synchronous=NORMAL``: a commit is not synced on its own; the WAL is synced before each checkpoint
    and the file after it. A crash of the process loses nothing committed; a power cut may lose the last commits
    before a checkpoint. At Dagster's FULL each event waited on one to three syncs (a sixth of the time a run
    spent storing its events: docs/design/code-measurements.md). A deployment that needs every event on disk at
    once runs the instance on PostgreSQL (docs/design/scaling-history.md)."""
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")


class RunWatchdog(SqliteEventLogStorageWatchdog):
    """Dagster's watcher of one run's events (it streams them to the webserver), woken by writes to the run's
    write-ahead log as well as to its database file: this storage leaves commits in the WAL until SQLite
    checkpoints them."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._patterns = [self._log_path, self._log_path + "-wal"]

    def on_modified(self, event: FileSystemEvent) -> None:
        self._process_log()


class EventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` (same files, same schema) whose connections outlive a statement."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._tables: set[str] = set()
        self._asset_key_columns: set[str] = set()
        super().__init__(base_dir, inst_data)

    @classmethod
    def config_type(cls) -> Any:
        return {"base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]) -> Any:
        """``base_dir`` defaults to where Dagster keeps a run's events: $DAGSTER_HOME/history/runs."""
        base_dir = config_value.get("base_dir")
        if base_dir is None:
            home = os.environ.get("DAGSTER_HOME")
            if not home:
                raise ValueError("EventLogStorage: set base_dir in dagster.yaml, or DAGSTER_HOME")
            base_dir = event_logs_directory(home)
        return cls(base_dir, inst_data=inst_data)

    def _engine(self, shard: str) -> Engine:
        """The shard's engine, made once (its one connection is reused; callers hold ``_db_lock``)."""
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        engine = create_engine(
            self.conn_string_for_shard(shard),
            poolclass=StaticPool,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
        )
        event.listen(engine, "connect", _synchronous_normal)
        if shard not in self._initialized_dbs:
            self._initdb(engine)
            self._initialized_dbs.add(shard)
        self._engines[shard] = engine
        runs = [s for s in self._engines if s != INDEX_SHARD_NAME]
        for old in runs[: max(0, len(runs) - KEPT_SHARDS)]:
            self._close(old)
        return engine

    def _close(self, shard: str) -> None:
        """Close a database's engine and connection, if open (callers hold ``_db_lock``): the last connection to
        close checkpoints the write-ahead log into the file and removes it."""
        engine = self._engines.pop(shard, None)
        if engine is not None:
            engine.dispose()

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock, self._engine(shard).connect() as conn, conn.begin():
            yield conn

    def store_event(self, event: EventLogEntry) -> None:
        """Dagster's; once a run has ended, its database's connection is closed, which checkpoints the run's
        write-ahead log into <run>.db and removes it (unless another process has the database open), so a
        finished run is one file."""
        super().store_event(event)
        if event.is_dagster_event and event.dagster_event_type in _RUN_ENDED:
            with self._db_lock:
                self._close(event.run_id)

    def watch(self, run_id: str, cursor: str | None, callback: EventHandlerFn) -> None:
        """Dagster's ``watch`` with ``RunWatchdog`` as the run's watcher."""
        observer: Any = self._obs  # Dagster's attribute (typed None there), as its own watch() makes it
        if observer is None:
            observer = Observer()
            observer.start()
            self._obs = observer
        watcher = RunWatchdog(self, run_id, callback, cursor)
        self._watchers[run_id][callback] = (watcher, observer.schedule(watcher, self._base_dir, recursive=True))

    def has_table(self, table_name: str) -> bool:
        if table_name in self._tables:
            return True
        found = super().has_table(table_name)  # asked inside other statements: it takes no lock
        if found:
            self._tables.add(table_name)
        return found

    def _has_asset_key_col_on_connection(self, conn: Connection, column_name: str) -> bool:
        """Asked (a reflection of the asset keys table) for every asset event stored: remembered once there
        (columns are only ever added, by a migration)."""
        if column_name in self._asset_key_columns:
            return True
        found = super()._has_asset_key_col_on_connection(conn, column_name)
        if found:
            self._asset_key_columns.add(column_name)
        return found

    def _dispose_engines(self) -> None:
        with self._db_lock:
            for shard in list(self._engines):
                self._close(shard)

    def wipe(self) -> None:
        """The run databases are deleted: their engines go first, and the next statement makes the file again."""
        self._dispose_engines()
        self._tables.clear()
        self._asset_key_columns.clear()
        super().wipe()

    def dispose(self) -> None:
        self._dispose_engines()
        super().dispose()
