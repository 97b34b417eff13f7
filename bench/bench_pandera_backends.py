#!/usr/bin/env python3
"""pandera's Polars backend against its Ibis backend, side by side in one run, on the same data and the same
rules: N rows shaped as the engine extracts them (per field its value and its JSON type), 1 % of rows
breaking each rule. Polars validates the Arrow batch DuckDB hands over; Ibis validates the table where it
lies, inside DuckDB. Each collects every failure (lazy validation), as the quarantine needs. Prints seconds
and the ratio; not a timed test. (`ibis-framework` is not a dependency: install it to run this.)

    python bench/bench_pandera_backends.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import time

import duckdb

FIELDS = ("persona", "player_input", "response", "npc_name")


def _table(con: duckdb.DuckDBPyConnection, rows: int) -> None:
    cols = []
    for i, f in enumerate(FIELDS):
        bad = f"(i % 100 = {i * 7 + 3})"  # 1 % of rows break this field, each field on other rows
        cols.append(f"CASE WHEN {bad} THEN NULL ELSE 'text ' || i::VARCHAR END AS {f}")
        cols.append(f"CASE WHEN {bad} THEN 'BIGINT' ELSE 'VARCHAR' END AS {f}__t")
    con.execute(f"CREATE TABLE t AS SELECT i AS line_number, {', '.join(cols)} FROM range({rows}) r(i)")


def _validate(pa, data) -> tuple[float, int]:
    """The same rules in either backend (``pa``: pandera.polars or pandera.ibis), every failure collected."""
    t0 = time.perf_counter()
    schema = pa.DataFrameSchema(
        {
            **{f: pa.Column(str, pa.Check.str_length(min_value=1), nullable=True) for f in FIELDS},
            **{f"{f}__t": pa.Column(str, pa.Check.isin(["VARCHAR"])) for f in FIELDS},
        }
    )
    try:
        schema.validate(data(), lazy=True)
        failures = 0
    except pa.errors.SchemaErrors as exc:
        failures = len(exc.failure_cases)
    return time.perf_counter() - t0, failures


def _polars(con: duckdb.DuckDBPyConnection) -> tuple[float, int]:
    import pandera.polars as pa

    return _validate(pa, lambda: con.execute("SELECT * FROM t").pl())  # the Arrow hand-over is timed too


def _ibis(con: duckdb.DuckDBPyConnection) -> tuple[float, int]:
    import ibis
    import pandera.ibis as pa

    return _validate(pa, lambda: ibis.duckdb.from_connection(con).table("t"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    try:
        import ibis  # noqa: F401
    except ImportError:
        print("ibis-framework is not installed (not a dependency): pip install ibis-framework to compare; skipped")
        return
    con = duckdb.connect()
    _table(con, args.rows)
    for name, fn in (("polars", _polars), ("ibis", _ibis), ("polars", _polars), ("ibis", _ibis)):
        secs, failures = fn(con)
        print(f"{name:6s}: {secs:6.2f}s, {failures} failure cases (expected {len(FIELDS) * args.rows // 100})")


if __name__ == "__main__":
    main()
