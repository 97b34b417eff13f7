"""The warehouse backend contract (``storage.registry`` chooses the backend ``EVAL_WAREHOUSE`` names).

A backend owns everything that differs between storages: its connections (and whatever it keeps open between
uses), its catalog cache, what a lost commit race means, the sandbox a person's query runs in, its upkeep. It says
nothing of Dagster: the orchestration derives what it needs from the storage's facts (``concurrent_writers``:
``runtime.instance`` lets two runs of one backfill go at once where other processes may write meanwhile). Nothing
outside this package asks which kind of backend it has: it asks the backend.

Adding a backend is one module in ``storage.backends`` with a class that satisfies :class:`WarehouseBackend` and a
factory registered with ``storage.registry.backend(name, prefix=...)`` (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

import duckdb

if TYPE_CHECKING:
    from eval_pipeline.storage.tables import Known

T = TypeVar("T")


@runtime_checkable
class WarehouseBackend(Protocol):
    """One warehouse, opened lazily, closed by :meth:`close` (or when the process ends)."""

    spec: str  # EVAL_WAREHOUSE as given (may hold credentials: never printed; see describe)
    concurrent_writers: bool  # other processes may commit between two of ours (commits can lose races)
    ddl_in_transaction: bool  # a table made and written in one transaction (a DuckDB file refuses some)

    def exists(self) -> bool: ...

    def describe(self) -> str:
        """Where the data is, without credentials."""
        ...

    def connect(self, read_only: bool = False) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection for one unit of work; the warehouse is the current database on it."""
        ...

    def writer(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection for one write, in autocommit mode (the write makes its own transactions): whatever this
        thread's step held open for its reads is ended first, so the step's next read sees the write."""
        ...

    def open_reader(self, as_of: str | None = None) -> duckdb.DuckDBPyConnection:
        """A new connection for queries typed by a person (the caller closes it): it can read the warehouse and
        nothing else, and write no file at all (by construction: it has no writable file system), whatever
        statement it is given."""
        ...

    def run_scope(self) -> AbstractContextManager[None]:
        """The lifetime of one run in this process (what the backend may keep open between its steps)."""
        ...

    def step_scope(self) -> AbstractContextManager[None]:
        """One warehouse step (many short connections in a row, on one thread): what its reads may share (a
        held connection, one read transaction)."""
        ...

    def bulk(self) -> AbstractContextManager[None]:
        """Heavy work ahead (a whole checkpoint's lines through the engine): every core for it, whatever the
        backend uses for the small statements most steps make."""
        ...

    def known(self) -> Known | None:
        """The tables and columns this backend may remember between statements; None: ask every time."""
        ...

    def forget(self) -> None:
        """Ask the catalog again from now on (a transaction that changed it was rolled back, or it is stale)."""
        ...

    def retrying(self, write: Callable[[], T]) -> T:
        """Run a whole write, again when its commit lost a race with another process's."""
        ...

    def keep_small(self, schema: str, table: str) -> None:
        """A table of many small writes of a few rows each (the pipeline's bookkeeping): kept where such writes
        cost least (a DuckLake: its rows in the catalog, not a Parquet file a write); nothing elsewhere."""
        ...

    def maintain(self, keep_days: int) -> Iterator[str]:
        """Upkeep (merge small files, expire old snapshots); yields what it did, step by step."""
        ...

    def upkeep(self, schemas: Collection[str] | None = None) -> str | None:
        """The upkeep a run does on its way out when it is due, on the tables of ``schemas`` (all: None) (a
        DuckLake: a table's small files merged once there are more than a few, which every statement would
        otherwise pay for); what it did, or None."""
        ...

    def repair(self) -> Iterator[str]:
        """Drop the tables whose stored files are gone (a re-run rebuilds them); yields what it did."""
        ...

    def attach_sql(self) -> str:
        """Statements that open this warehouse read-only in a plain DuckDB (the CLI, Python), offline."""
        ...

    def copy_from_file(self, path: str) -> Iterator[tuple[str, str, int]]:
        """Every table of the DuckDB file ``path`` copied in (an earlier version's warehouse); yields (schema,
        table, rows copied, or -1 when this warehouse has it already). Refused (BackendError) where it means
        nothing."""
        ...

    def stored_files(self) -> list[Path]:
        """Every local file the warehouse's data lives in (for audits: a secret scan, a backup)."""
        ...

    def close(self) -> None: ...


class BackendError(ValueError):
    """EVAL_WAREHOUSE names no backend this package has, or is incomplete."""
