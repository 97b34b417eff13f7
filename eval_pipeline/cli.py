"""`eval-pipeline`: run checkpoints, list them, query the warehouse read-only, backfill.

Errors are one clear line on stderr with a non-zero exit code; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


class CliError(Exception):
    pass


def _instance():
    import dagster as dg

    from eval_pipeline.core import settings

    home = settings.dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    return dg.DagsterInstance.get()


def _select(scan, ids: list[str] | None):
    known = {c.checkpoint_id: c for c in scan.complete}
    if not ids:
        return sorted(known.values(), key=lambda c: (c.created_at, c.checkpoint_id))
    missing = [i for i in ids if i not in known]
    if missing:
        raise CliError(f"no complete checkpoint folder for {', '.join(missing)} (see 'eval-pipeline checkpoints')")
    return [known[i] for i in ids]


def cmd_run(args: argparse.Namespace) -> int:
    from eval_pipeline.defs.definitions import build_definitions
    from eval_pipeline.defs.runner import materialize_checkpoints
    from eval_pipeline.ingest.checkpoints import scan_checkpoints

    defs = build_definitions()
    known_rubrics = {k.path[0] for k in defs.resolve_asset_graph().get_all_asset_keys()}
    bad = sorted(set(args.rubric or []) - known_rubrics)
    if bad:
        raise CliError(f"unknown rubric(s) {', '.join(bad)}; known: {', '.join(sorted(known_rubrics))}")
    ckpts = _select(scan_checkpoints(), args.checkpoint)
    if not ckpts:
        raise CliError("no complete checkpoint folders found")
    instance = _instance()
    failed = 0
    for i, c in enumerate(ckpts, start=1):
        print(f"[{i}/{len(ckpts)}] {c.checkpoint_id} ({c.model}) ...", flush=True)
        t0 = time.perf_counter()
        out = materialize_checkpoints(defs, instance, [c.checkpoint_id], set(args.rubric) if args.rubric else None)
        for o in out:
            failed += not o.success
            print(
                f"      {'ok' if o.success else 'FAILED'} in {time.perf_counter() - t0:.1f}s: "
                f"{', '.join(o.rubrics)} (run {o.run_id[:8]})",
                flush=True,
            )
    return 1 if failed else 0


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from eval_pipeline.core import settings
    from eval_pipeline.core.warehouse import Warehouse
    from eval_pipeline.defs.partitions import CHECKPOINTS
    from eval_pipeline.ingest.checkpoints import scan_checkpoints

    scan = scan_checkpoints()
    registered = set(_instance().get_dynamic_partitions(CHECKPOINTS.name))
    gates: dict[str, str] = {}
    path = settings.warehouse_path()
    if Path(path).exists():
        wh = Warehouse(path)
        if wh.table_exists("main", "checkpoints"):
            try:
                for ckpt, passed, total in wh.query_rows(
                    "SELECT checkpoint_id, sum(gates_passed), sum(gates_total) FROM main.leaderboard GROUP BY 1"
                ):
                    gates[ckpt] = f"{int(passed or 0)}/{int(total or 0)} gates"
            except Exception:  # views not built yet
                pass
    print(f"{'checkpoint':<16} {'model':<18} {'created':<22} {'parent':<12} {'status':<12} {'rubrics'}")
    for c in sorted(scan.complete, key=lambda c: (c.created_at, c.checkpoint_id)):
        status = gates.get(c.checkpoint_id) or ("registered" if c.checkpoint_id in registered else "new")
        print(
            f"{c.checkpoint_id:<16} {c.model:<18} {c.created_at:<22} {c.parent or '-':<12} {status:<12} "
            f"{', '.join(sorted(c.rubric_files))}"
        )
    for name in scan.incomplete:
        print(f"{name:<16} (still being written: no checkpoint.json)")
    for reason in scan.refused:
        print(f"refused: {reason}")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    import pandas as pd

    from eval_pipeline.core import settings
    from eval_pipeline.core.warehouse import Warehouse

    wh = Warehouse(args.warehouse or settings.warehouse_path())
    with wh.connect(read_only=True) as con:
        try:
            df = con.execute(args.query).df()
        except Exception as exc:  # duckdb errors: one line
            raise CliError(str(exc).splitlines()[0]) from exc
    with pd.option_context(
        "display.max_rows", args.max_rows, "display.width", 200, "display.max_columns", 50, "display.max_colwidth", 80
    ):
        print(df.to_string(index=False) if not df.empty else "(no rows)")
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    from eval_pipeline.ingest.checkpoints import scan_checkpoints

    ckpts = _select(scan_checkpoints(), None)
    ids = [c.checkpoint_id for c in ckpts]
    lo = ids.index(args.start) if args.start in ids else 0
    hi = ids.index(args.end) + 1 if args.end in ids else len(ids)
    for name in (args.start, args.end):
        if name and name not in ids:
            raise CliError(f"unknown checkpoint {name!r}")
    args.checkpoint = ids[lo:hi]
    return cmd_run(args)


def cmd_report(args: argparse.Namespace) -> int:
    from eval_pipeline.core import settings
    from eval_pipeline.core.warehouse import Warehouse
    from eval_pipeline.publish.report import write_report

    wh = Warehouse(args.warehouse or settings.warehouse_path())
    if not Path(wh.path).exists():
        raise CliError(f"warehouse {wh.path} does not exist yet: run 'eval-pipeline run' first")
    path = write_report(wh, args.out)
    print(f"report written to {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="eval-pipeline", description=__doc__.splitlines()[0])
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="register and evaluate checkpoints in-process")
    run.add_argument("--checkpoint", action="append", help="checkpoint id (repeatable; default: all)")
    run.add_argument("--rubric", action="append", help="rubric name (repeatable; default: every rubric with a file)")
    run.set_defaults(fn=cmd_run)
    ck = sub.add_parser("checkpoints", help="list checkpoint folders with their status")
    ck.set_defaults(fn=cmd_checkpoints)
    sql = sub.add_parser("sql", help="run a read-only SQL query on the warehouse")
    sql.add_argument("query")
    sql.add_argument("--warehouse", help="DuckDB file (default EVAL_WAREHOUSE or data/warehouse.duckdb)")
    sql.add_argument("--max-rows", type=int, default=200)
    sql.set_defaults(fn=cmd_sql)
    bf = sub.add_parser("backfill", help="evaluate all checkpoints (or a range, by creation order)")
    bf.add_argument("--from", dest="start")
    bf.add_argument("--to", dest="end")
    bf.add_argument("--rubric", action="append")
    bf.set_defaults(fn=cmd_backfill)
    rp = sub.add_parser("report", help="write a static HTML report (one file, offline)")
    rp.add_argument("--out", default="reports")
    rp.add_argument("--warehouse")
    rp.set_defaults(fn=cmd_report)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print("eval-pipeline: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one clear line unless --debug
        if args.debug:
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"eval-pipeline: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
