"""`sql`, `export`, `maintain`, `attach-sql`, `migrate`: the warehouse, read and kept."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from eval_pipeline.cli.common import CliError, Parents, Subcommands, clean_table


def cmd_sql(args: argparse.Namespace) -> int:
    """Run a read-only SQL query on the warehouse.

    A person's query, read-only by construction; the result as a table, CSV, JSON lines or Parquet, to
    stdout or ``--out``. A reader that closes the pipe early (``| head``) ends it quietly."""
    from eval_pipeline.storage.warehouse import Warehouse

    if args.max_rows < 0:
        raise CliError("--max-rows must be 0 or more")
    if args.format == "parquet" and not args.out:
        raise CliError("--format parquet needs --out FILE (Parquet is not written to a terminal)")
    wh = Warehouse(args.warehouse)
    if not wh.exists():
        raise CliError(f"warehouse {wh.describe()} does not exist yet: run 'eval-pipeline run' (or make demo) first")
    try:
        table = wh.query_readonly(args.query, as_of=args.as_of)
    except Exception as exc:  # duckdb errors and refused statements: one line
        text = str(exc).strip()
        raise CliError(text.splitlines()[0] if text else type(exc).__name__) from exc
    _write_result(table, args)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write a checkpoint's results as files (Parquet, CSV or JSON).

    One file per table (publish.export), and a manifest.json."""
    from eval_pipeline.publish.export import export_checkpoint
    from eval_pipeline.storage.warehouse import Warehouse

    wh = Warehouse(args.warehouse, read_only=True)
    if not wh.exists():
        raise CliError(f"warehouse {wh.describe()} does not exist yet: run 'eval-pipeline run' (or make demo) first")
    out = Path(args.out or f"export-{args.checkpoint}-{args.format}")  # another format: another folder
    if out.exists() and any(out.iterdir()):
        raise CliError(f"{out} exists and is not empty: give a new --out folder")
    try:
        written = export_checkpoint(wh, args.checkpoint, args.rubric, out, args.format)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    rows = sum(e.rows for e in written)
    print(f"wrote {len(written)} file(s), {rows} row(s), to {out}/ (manifest.json lists them)")
    return 0


def _json_value(value: Any) -> Any:
    from decimal import Decimal

    if isinstance(value, Decimal):  # sums of integers (HUGEINT) arrive as decimals: keep them numbers
        return int(value) if value == value.to_integral_value() else float(value)
    return str(value)  # dates, times, intervals, UUIDs, bytes: as text


def _write_result(table: Any, args: argparse.Namespace) -> None:
    import json

    import pandas as pd
    import pyarrow.parquet as pq

    if args.format == "parquet":
        pq.write_table(table, args.out)
        print(f"wrote {table.num_rows} row(s) to {args.out}", file=sys.stderr)
        return
    from eval_pipeline.storage.readonly import as_text_where_needed

    table = as_text_where_needed(table)
    if args.format == "csv":
        text = table.to_pandas().to_csv(index=False)  # from Arrow: a sum of integers (a decimal) stays "6"
    elif args.format == "json":
        text = "".join(json.dumps(row, default=_json_value, ensure_ascii=False) + "\n" for row in table.to_pylist())
    else:
        df = table.slice(0, args.max_rows).to_pandas()
        with pd.option_context("display.width", 200, "display.max_columns", 50, "display.max_colwidth", 80):
            # to_string ignores display.max_colwidth: a long cell (a verdict's reasons) is cut here, with "...";
            # --format csv or json gives it whole
            text = clean_table(df.to_string(index=False, max_colwidth=80)) if table.num_rows else "(no rows)"
        if table.num_rows > len(df):
            text += f"\n({table.num_rows - len(df)} more row(s) not shown; --max-rows {args.max_rows})"
        text += "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {table.num_rows} row(s) to {args.out}", file=sys.stderr)
        return
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader has what it wanted (| head): not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def cmd_maintain(args: argparse.Namespace) -> int:
    """DuckLake upkeep: merge small files, expire old snapshots.

    Warehouse upkeep (on a DuckLake: merge the small Parquet files many partition writes leave, expire the
    snapshots replaced before the kept window, delete the files no kept snapshot needs any more). Readers go on
    reading meanwhile: every step is a transaction of its own, and what a query may still be reading is kept."""
    from eval_pipeline.storage.backend import BackendError
    from eval_pipeline.storage.warehouse import Warehouse

    wh = Warehouse()
    if args.keep_days < 0:
        raise CliError("--keep-days must be 0 or more")
    try:
        steps = wh.backend.repair() if args.repair else wh.backend.maintain(args.keep_days)
        if not wh.exists():
            raise CliError(f"warehouse {wh.describe()} does not exist yet")
        for what in steps:
            print(f"maintain: {what}")
    except BackendError as exc:
        raise CliError(str(exc)) from None
    return 0


def cmd_attach_sql(args: argparse.Namespace) -> int:
    """Print the SQL that opens the warehouse read-only in a plain DuckDB.

    For DuckDB's CLI or Python, offline."""
    from eval_pipeline.storage.warehouse import Warehouse

    sys.stdout.write(Warehouse(args.warehouse).backend.attach_sql())
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """Copy a warehouse file an earlier version made into the lake (the file is unchanged).

    The lake is the one EVAL_WAREHOUSE names; the DuckDB file is only read, never changed."""
    from eval_pipeline.storage.backend import BackendError
    from eval_pipeline.storage.views import refresh_views
    from eval_pipeline.storage.warehouse import Warehouse

    source = Path(args.source)
    if not source.exists():
        raise CliError(f"{source}: no such file (nothing to migrate)")
    if not source.is_file():
        raise CliError(f"{source} is not a DuckDB file")
    wh = Warehouse()
    try:
        copied_tables = wh.backend.copy_from_file(str(source.resolve()))
    except BackendError as exc:
        raise CliError(str(exc)) from None
    copied = skipped = 0
    for schema, table, rows in copied_tables:
        if rows < 0:
            skipped += 1
            print(f"migrate: {schema}.{table} already in the lake: left as it is")
        else:
            copied += 1
            print(f"migrate: {schema}.{table}: {rows} rows")
    refresh_views(wh)
    print(f"migrate: {copied} table(s) copied, {skipped} left as they were, into {wh.describe()}; {source} unchanged")
    return 0


def _rubric_and_warehouse(args: argparse.Namespace) -> tuple[Any, Any]:
    """The rubric ``--rubric`` names and the warehouse to read (read-only); one line and exit 2 when either is not
    there."""
    from eval_pipeline.rubrics import load_rubrics
    from eval_pipeline.storage.warehouse import Warehouse

    rubrics = {r.name: r for r in load_rubrics()}
    if args.rubric not in rubrics:
        raise CliError(f"no rubric {args.rubric!r} (rubrics: {', '.join(sorted(rubrics))})")
    wh = Warehouse(args.warehouse, read_only=True)
    if not wh.exists():
        raise CliError(f"warehouse {wh.describe()} does not exist yet: run 'eval-pipeline run' (or make demo) first")
    return rubrics[args.rubric], wh


def cmd_compare(args: argparse.Namespace) -> int:
    """Any two checkpoints of a rubric: B against A, with the parent comparison's paired test and margins.

    Changes are B - A, by the parent comparison's own test
    (scoring.comparison: paired over the samples both scored, Holm over the rubric's scores, the practical margins,
    the human-calibrated changes where people rated both). Two checkpoints another judge judged are not compared:
    the line says so and how to re-judge."""
    from eval_pipeline.core.ids import check_checkpoint_id
    from eval_pipeline.scoring.compared import compared

    for c in (args.a, args.b):
        check_checkpoint_id(c)
    rubric, wh = _rubric_and_warehouse(args)
    with wh.session() as reader:
        have = reader.table_exists(rubric.name, "scores")
        for c in (args.a, args.b):
            if not have or not reader.count(rubric.name, "scores", {"checkpoint_id": c}):
                raise CliError(f"checkpoint {c} has no {rubric.name} scores in {wh.describe()}: evaluate it first")
        rows, note = compared(reader, rubric, args.b, args.a)
    print(f"{rubric.name}: {args.b} against {args.a} ({note})")
    if rows.empty or (rows.status == "not_comparable").all():
        return 0
    shown = rows.assign(
        change=rows.delta.map(lambda v: f"{v:+.3f}"),
        ci95=[f"[{lo:+.3f}, {hi:+.3f}]" for lo, hi in zip(rows.ci_low, rows.ci_high, strict=True)],
        p_holm=rows.p_holm.map(lambda v: f"{v:.2g}"),
        verdict=["REGRESSION" if r else "" for r in rows.regression],
        note=rows.note.fillna(""),
    )
    cols = ["score", "n_pairs", "parent_mean", "mean", "change", "ci95", "p_holm", "verdict", "note"]
    table = shown[cols].rename(columns={"parent_mean": f"mean {args.a}", "mean": f"mean {args.b}"})
    print(clean_table(table.round(3).to_string(index=False)))
    return 0


def cmd_ranks(args: argparse.Namespace) -> int:
    """Every checkpoint's 95 % rank set on a score (default: the headline), among those its judge judged.

    The rank sets of any score of a rubric (default: the stored ones of its headline), computed now from the
    warehouse as the ``ranks`` asset computes the headline's (scoring.ranks): one ranking per judge identity."""
    from eval_pipeline.scoring.ranks import rank_table

    rubric, wh = _rubric_and_warehouse(args)
    with wh.session() as reader:
        if not reader.table_exists(rubric.name, "scores"):
            raise CliError(f"no {rubric.name} scores in {wh.describe()}: evaluate a checkpoint first")
        score = args.score or rubric.headline
        if score not in reader.columns(rubric.name, "scores"):
            raise CliError(f"{rubric.name} has no per-sample score {score!r}")
        ckpts = [
            str(c) for c in reader.read(rubric.name, "scores", columns=("checkpoint_id",), distinct=True).checkpoint_id
        ]
        table = rank_table(reader, rubric, sorted(ckpts), score)
    shown = table[["checkpoint_id", "score", "judge_label", "mean", "rank_set", "basis"]].round(3)
    print(clean_table(shown.to_string(index=False)))
    return 0


def add_parsers(sub: Subcommands, parents: Parents) -> None:
    """This module's commands, on the command's parser."""
    sql = parents.command(sub, cmd_sql, reads=True)
    sql.add_argument("query", help="the query (SQL; read-only: only queries of the warehouse run)")
    sql.add_argument("--max-rows", type=int, default=200, help="rows shown by --format table (default 200)")
    sql.add_argument(
        "--format",
        choices=("table", "csv", "json", "parquet"),
        default="table",
        help="how the rows are written (json: one object per line; parquet needs --out)",
    )
    sql.add_argument("--out", help="write the result to this file instead of stdout")
    sql.add_argument("--as-of", help="a DuckLake snapshot id or a timestamp: read the warehouse as it was then")
    parents.command(sub, cmd_attach_sql, reads=True)
    mg = parents.command(sub, cmd_migrate)
    mg.add_argument("source", help="the DuckDB file (e.g. data/warehouse.duckdb)")
    ex = parents.command(sub, cmd_export, reads=True)
    ex.add_argument("--checkpoint", required=True, help="the checkpoint to export")
    ex.add_argument("--rubric", action="append", help="only this rubric (repeatable; default: every rubric)")
    ex.add_argument(
        "--format", choices=["parquet", "csv", "json"], default="parquet", help="one file per table in this format"
    )
    ex.add_argument("--out", help="an empty or new folder (default: ./export-<checkpoint>-<format>)")
    cp = parents.command(sub, cmd_compare, reads=True)
    cp.add_argument("a", help="the checkpoint compared against (e.g. the released one)")
    cp.add_argument("b", help="the checkpoint compared (changes are B - A)")
    cp.add_argument("--rubric", required=True, help="the rubric")
    rk = parents.command(sub, cmd_ranks, reads=True)
    rk.add_argument("--rubric", required=True, help="the rubric")
    rk.add_argument("--score", help="a per-sample score or dimension (default: the rubric's headline)")
    mt = parents.command(sub, cmd_maintain)
    mt.add_argument(
        "--keep-days",
        type=int,
        default=30,
        help="days of time travel kept: snapshots replaced before them are expired (default 30)",
    )
    mt.add_argument(
        "--repair", action="store_true", help="drop the tables whose data files are gone (a re-run rebuilds them)"
    )
