"""The storage layer: every SQL connection of the pipeline is made here.

``Warehouse`` is what the rest of the package uses; a backend (``backend.WarehouseBackend``: a DuckDB file, a
DuckLake on SQLite, a DuckLake on PostgreSQL) is what it runs on, chosen from ``EVAL_WAREHOUSE``.

For a notebook::

    from eval_pipeline.storage import connect
    con = connect()                      # the warehouse EVAL_WAREHOUSE names (default: the project's lake)
    con.sql("SELECT * FROM main.leaderboard").df()

The connection reads the newest snapshot at every statement, never blocks a run, and cannot write.
"""

from __future__ import annotations

import duckdb

from eval_pipeline.storage.warehouse import Warehouse


def connect(warehouse: str | None = None, as_of: str | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the warehouse, with the warehouse as the current database, for a notebook or a
    script (``as_of``: a DuckLake snapshot id or a timestamp). It holds no lock a run waits on (on the default
    DuckLake); close it when done."""
    return Warehouse(warehouse).backend.open_reader(as_of)


__all__ = ["Warehouse", "connect"]
