"""Table helpers shared by every warehouse write: safe qualified names, column types, partitions."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeAlias

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from eval_pipeline.core.ids import check_identifier


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


def qualified(schema: str, table: str) -> str:
    """A quoted ``schema.table`` after checking both are safe identifiers."""
    check_identifier(schema, "schema name")
    check_identifier(table, "table name")
    return f'"{schema}"."{table}"'


def quote_ident(name: str) -> str:
    """A quoted column name after checking it is a safe identifier."""
    check_identifier(name, "column name")
    return f'"{name}"'


def literal(text: str) -> str:
    """A SQL string literal (for SQL that cannot take parameters: DuckDB's relation API, ATTACH options)."""
    return "'" + text.replace("'", "''") + "'"


def duck_type(series: pd.Series) -> str:
    kind = series.dtype.kind
    if kind == "b":
        return "BOOLEAN"
    if kind in "iu":
        return "BIGINT"
    if kind == "f":
        return "DOUBLE"
    if kind == "M":
        return "TIMESTAMP"
    return "VARCHAR"


def _arrow_type(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_integer(t):
        return "BIGINT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    return "VARCHAR"


# what a write takes: pandas, or Arrow straight from the engine (no Python object per row)
Frame: TypeAlias = pd.DataFrame | pa.Table


def column_names(df: Frame | pa.RecordBatchReader) -> list[str]:
    if isinstance(df, pa.RecordBatchReader):
        return list(df.schema.names)
    return df.column_names if isinstance(df, pa.Table) else [str(c) for c in df.columns]


def insert_by_name(con: duckdb.DuckDBPyConnection, target: str, df: Frame | pa.RecordBatchReader) -> None:
    """Insert a frame, or a stream of Arrow batches (read once), by column name (a table may hold more columns,
    or in another order). DuckDB reads it through its replacement scan of this local name, not
    ``con.register``: a registered view is a catalog entry, and a transaction keeps every dropped entry, and the
    frame it holds, alive until it ends (1M raw lines written in chunks inside one transaction held 2 GB)."""
    incoming_frame = df  # noqa: F841
    collist = ", ".join(f'"{c}"' for c in column_names(df))
    con.execute(f"INSERT INTO {target} ({collist}) SELECT {collist} FROM incoming_frame")


def copy_to_parquet(con: duckdb.DuckDBPyConnection, df: Frame | pa.RecordBatchReader, path: str) -> None:
    """Write a frame, or a stream of Arrow batches (read once, never whole in memory), to a Parquet file."""
    outgoing_frame = df  # noqa: F841
    con.execute(f"COPY (SELECT * FROM outgoing_frame) TO {literal(path)} (FORMAT parquet, COMPRESSION zstd)")


@dataclass
class Select:
    """Rows a query makes inside the warehouse, inserted without leaving the engine (1M validated samples:
    their text is never copied out to Arrow and back). ``like``: an empty frame with the columns and types the
    rows have (it declares the table); ``tables``: small Arrow tables the query reads by name, registered on
    the connection that runs it."""

    sql: str
    params: list[object]
    like: Frame
    tables: dict[str, pa.Table] = field(default_factory=dict)

    @contextmanager
    def _registered(self, con: duckdb.DuckDBPyConnection) -> Iterator[str]:
        """The query's columns (those of ``like``, in order), with its tables registered on ``con`` meanwhile."""
        for name, table in self.tables.items():
            con.register(name, table)
        try:
            yield ", ".join(f'"{c}"' for c in column_names(self.like))
        finally:
            for name in self.tables:
                con.unregister(name)

    def insert_into(self, con: duckdb.DuckDBPyConnection, target: str) -> int:
        """Insert the rows by column name; the number inserted."""
        with self._registered(con) as collist:
            row = con.execute(f"INSERT INTO {target} ({collist}) SELECT {collist} FROM ({self.sql})", self.params)
            (n,) = row.fetchone() or (0,)
        return int(n)

    def read(self, con: duckdb.DuckDBPyConnection, order_by: str | None = None, limit: int | None = None) -> pa.Table:
        """The rows as Arrow, in the columns of ``like`` (small results: tests, the CLI, a batch's held rows),
        ordered by ``order_by``, at most ``limit``."""
        order = f" ORDER BY {order_by}" if order_by else ""
        most = f" LIMIT {int(limit)}" if limit is not None else ""
        with self._registered(con) as collist:
            return con.execute(f"SELECT {collist} FROM ({self.sql}){order}{most}", self.params).to_arrow_table()


# An Arrow field's metadata key naming how DuckDB stores the column (``USING COMPRESSION``), for columns of long,
# repetitive text; applied when the table is created, where the warehouse file's storage version has the method
# (zstd for text: v1.2.0, which new files get, see warehouse._duckdb_config). Elsewhere DuckDB chooses, as always.
COMPRESSION = b"compression"
_COMPRESSION_SINCE = {"zstd": (1, 2)}  # storage version a method needs (an older file would store the column raw)


def column_compression(df: Frame) -> dict[str, str]:
    """The compression each column's Arrow field asks for (``COMPRESSION`` in its metadata)."""
    if not isinstance(df, pa.Table):
        return {}
    return {f.name: f.metadata[COMPRESSION].decode() for f in df.schema if f.metadata and COMPRESSION in f.metadata}


def _storable(con: duckdb.DuckDBPyConnection, compression: dict[str, str]) -> dict[str, str]:
    """The columns' compressions the current database can store: those whose method its storage version has (a
    file's; an in-memory database or a DuckLake has none: their tables take no ``USING COMPRESSION``)."""
    if not compression:
        return {}
    row = con.execute("SELECT tags FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    version = str((row[0] if row else {}).get("storage_version", "")).lstrip("v").rstrip("+")
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return {}
    return {c: m for c, m in compression.items() if m in _COMPRESSION_SINCE and (major, minor) >= _COMPRESSION_SINCE[m]}


def column_types(df: Frame) -> list[tuple[str, str]]:
    if isinstance(df, pa.Table):
        return [(f.name, _arrow_type(f.type)) for f in df.schema]
    return [(c, duck_type(df[c])) for c in df.columns]


def check_partition(schema: str, table: str, df: Frame, where: Where) -> None:
    """Safe names, and every row of ``df`` inside the partition ``where`` (column = value)."""
    qualified(schema, table)
    for col, value in where.items():
        check_identifier(col, "column name")
        if col not in column_names(df) or len(df) == 0:
            continue
        if isinstance(df, pa.Table):
            ok = pc.all(pc.equal(df[col], pa.scalar(value)), skip_nulls=False).as_py() is True
        else:
            ok = bool((df[col] == value).all())
        if not ok:
            raise ValueError(f"rows written to {schema}.{table} must all have {col} = {value!r}")


Filter = str | int | float | bool | None | Sequence[str | int | float | bool]  # a column's value, or any of several


Where = Mapping[str, Filter]  # a partition (or any filter): column -> its value, or any of several


def conditions(where: Where) -> tuple[str, list[object]]:
    """``where`` as a condition with bound values: ``"c" = ?``, ``"c" IS NULL``, ``"c" IN (?, ...)``."""
    parts: list[str] = []
    params: list[object] = []
    for column, value in where.items():
        name = quote_ident(column)
        if value is None:
            parts.append(f"{name} IS NULL")
        elif isinstance(value, (list, tuple)):
            parts.append(f"{name} IN ({', '.join('?' for _ in value)})" if value else "FALSE")
            params += list(value)
        else:
            parts.append(f"{name} = ?")
            params.append(value)
    return " AND ".join(parts) or "TRUE", params


def select_sql(
    schema: str,
    table: str,
    columns: Sequence[str],
    where: Mapping[str, Filter],
    order_by: Sequence[str],
    distinct: bool,
    limit: int | None,
) -> tuple[str, list[object]]:
    """The statement and values of ``Warehouse.read``."""
    cols = ", ".join(quote_ident(c) for c in columns) or "*"
    condition, params = conditions(where)
    sql = f"SELECT {'DISTINCT ' if distinct else ''}{cols} FROM {qualified(schema, table)} WHERE {condition}"
    if order_by:
        sql += " ORDER BY " + ", ".join(quote_ident(c) for c in order_by)
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, params


def count_sql(
    schema: str, table: str, where: Mapping[str, Filter], distinct: Sequence[str]
) -> tuple[str, list[object]]:
    """The statement and values of ``Warehouse.count``."""
    what = f"count(DISTINCT ({', '.join(quote_ident(c) for c in distinct)}))" if distinct else "count(*)"
    condition, params = conditions(where)
    return f"SELECT {what} FROM {qualified(schema, table)} WHERE {condition}", params


def partition_condition(where: Where) -> str:
    return " AND ".join(f'"{c}" = ?' for c in where) or "TRUE"


PartitionKey = tuple[str, str, tuple[tuple[str, object], ...]]  # (schema, table, the partition's column values)


def partition_key(schema: str, table: str, where: Where) -> PartitionKey:
    """One partition of one table, as a dictionary key (the order of ``where`` does not matter)."""
    return (schema, table, tuple(sorted(where.items())))


Known = dict[tuple[str, str], dict[str, str]]  # (schema, table) -> {column: type}, as last seen in the catalog


# a table's columns and types in their order (parameters: schema, table); no rows when there is no such table
# (duckdb_columns(), as CATALOG_SQL: information_schema.columns answers the same ~25 % slower on a file)
COLUMNS_SQL = (
    "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
    "AND schema_name = ? AND table_name = ? ORDER BY column_index"
)


# every table's and view's columns and types, in their order (the catalog of the connection's current database)
CATALOG_SQL = (
    "SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns() "
    "WHERE database_name = current_database() ORDER BY schema_name, table_name, column_index"
)


def columns_of(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> dict[str, str]:
    """The table's columns and types in their order; empty when there is no such table."""
    return dict(con.execute(COLUMNS_SQL, [schema, table]).fetchall())


def changes_shape(df: Frame, have: Mapping[str, str] | None) -> bool:
    """Whether writing ``df`` into a table whose columns are ``have`` (None: not known to exist) would make the
    table, add a column or give a column made VARCHAR from empty frames its real type (``ensure_table``)."""
    if have is None:
        return True
    cols = column_types(df)
    if not all(c in have for c, _ in cols):
        return True
    return len(df) > 0 and any(have.get(c) == "VARCHAR" and t in _HEALABLE for c, t in cols)


def ensure_table(
    con: duckdb.DuckDBPyConnection, schema: str, table: str, df: Frame, known: Known | None = None
) -> None:
    """Outside a transaction: the table with every column of ``df``; a column an older version created as
    VARCHAR from an all-empty frame gets the frame's real type when its values allow it. ``known``: the
    columns this process has already seen (a DuckLake's catalog is slow to ask, a DuckDB file's is not):
    when the table has every column with no type to heal, nothing is asked."""
    cols = column_types(df)
    if not changes_shape(df, known.get((schema, table)) if known is not None else None):
        return
    now = _ensure_table(con, schema, table, df, cols, column_compression(df), known)
    if known is not None:
        known[(schema, table)] = now


def _ensure_table(
    con: duckdb.DuckDBPyConnection,
    schema: str,
    table: str,
    df: Frame,
    cols: list[tuple[str, str]],
    compression: dict[str, str],
    known: Known | None = None,
) -> dict[str, str]:
    """The table's columns once it has every one of ``cols``, with the types healed where the values allow."""
    existing = ensure_columns(con, schema, table, cols, compression, known)
    if len(df) == 0:
        return existing  # an empty frame's object columns say nothing about the type
    target = qualified(schema, table)
    healed = False
    rebuild: dict[str, str] = {}
    for c, t in cols:
        if existing.get(c) == "VARCHAR" and t in _HEALABLE:
            (bad,) = con.execute(
                f'SELECT count(*) FROM {target} WHERE "{c}" IS NOT NULL AND TRY_CAST("{c}" AS {t}) IS NULL'
            ).fetchone() or (1,)
            if bad:
                continue  # values that are not of the type: left as they are, never nulled
            try:
                con.execute(f'ALTER TABLE {target} ALTER COLUMN "{c}" SET DATA TYPE {t} USING CAST("{c}" AS {t})')
                healed = True
            except duckdb.Error:
                rebuild[c] = t  # a DuckLake only widens types: the table is rebuilt with the cast below
    if rebuild:
        healed = _rebuilt(con, schema, table, list(existing), rebuild) or healed
    return columns_of(con, schema, table) if healed else existing


def _rebuilt(con: duckdb.DuckDBPyConnection, schema: str, table: str, order: list[str], casts: dict[str, str]) -> bool:
    """The table made again with ``casts`` applied (every value already checked to cast), in one transaction:
    copied, the old one dropped, the copy renamed; False (nothing changed) when the backend refuses it."""
    target, copy = qualified(schema, table), qualified(schema, f"{table}__healing")
    select = ", ".join(f'CAST("{c}" AS {casts[c]}) AS "{c}"' if c in casts else f'"{c}"' for c in order)
    try:
        with transaction(con):
            con.execute(f"CREATE TABLE {copy} AS SELECT {select} FROM {target}")
            con.execute(f"DROP TABLE {target}")
            con.execute(f'ALTER TABLE {copy} RENAME TO "{table}"')
    except duckdb.Error:
        return False  # e.g. a view depends on it: the insert casts instead
    return True


_HEALABLE = ("DOUBLE", "BIGINT", "BOOLEAN")


def ensure_columns(
    con: duckdb.DuckDBPyConnection,
    schema: str,
    table: str,
    cols: list[tuple[str, str]],
    compression: dict[str, str] | None = None,
    known: Known | None = None,
) -> dict[str, str]:
    """Create the schema and table if needed, and add any column it lacks (a rubric edit added one); the
    table's columns after. The catalog is changed only when something is missing (on a DuckLake each change, even
    a CREATE ... IF NOT EXISTS that finds the table, is a new snapshot). ``known``: the whole catalog as the
    backend remembers it; a table it lacks is not asked for again, a schema it has is not created again."""
    target = qualified(schema, table)
    if known is not None and (schema, table) in known:
        existing = dict(known[(schema, table)])
    elif known is not None:
        existing = {}
    else:
        existing = columns_of(con, schema, table)
    if not existing:
        if known is None or not any(s == schema for s, _ in known):
            con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        stored = _storable(con, compression or {})
        coldefs = ", ".join(f'"{c}" {t}' + (f" USING COMPRESSION {stored[c]}" if c in stored else "") for c, t in cols)
        con.execute(f"CREATE TABLE IF NOT EXISTS {target} ({coldefs})")
        # as made here; had another process made it first with other columns, the insert fails by name and the
        # backend's retry asks the catalog again
        existing = dict(cols)
    missing = [(c, t) for c, t in cols if c not in existing]
    for c, t in missing:
        con.execute(f'ALTER TABLE {target} ADD COLUMN "{c}" {t}')
    return columns_of(con, schema, table) if missing else existing
