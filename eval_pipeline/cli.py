"""`eval-pipeline`: run checkpoints, list them, query the warehouse read-only, backfill.

Errors are one clear line on stderr with a non-zero exit code; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn

from eval_pipeline.core.terminal import (
    EXIT_INTERRUPTED,
    EXIT_RUN_FAILED,
    EXIT_SERVER,
    EXIT_USAGE,
    clean,
    exit_now,
)

EXIT_CODES = """exit codes:
  0    every checkpoint evaluated, every gate passed, the data complete
  1    a run failed (the failed step and its error are printed)
  2    a usage or configuration error (bad arguments, an invalid rubric YAML); a rubric file that does not
       load is skipped in one line and the others run: the command exits 2 when it would have exited 0
  3    gates failed (--no-fail-on-gates: exit 0 instead)
  4    incomplete data (judge scores missing, lines quarantined or rating rows rejected above the rubric's
       completeness thresholds, or a rating file rejected whole)
  5    a server could not start (`view`, `ui`: the port is in use or cannot be bound)
  130  interrupted (Ctrl-C): what finished is listed, nothing further starts
"""


class ServerError(Exception):
    """A server of ours could not start."""


def _port_free(host: str, port: int) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as the server itself binds (uvicorn sets SO_REUSEADDR): a port whose last server was killed a moment ago
        # (connections in TIME_WAIT) is free, one a server listens on is not
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            why = exc.strerror or exc
            raise ServerError(f"cannot serve on {host}:{port}: {why} (another server? try --port)") from None


class CliError(Exception):
    pass


def _instance() -> Any:  # a DagsterInstance (dagster imported only when a command needs it)
    from eval_pipeline.core import settings
    from eval_pipeline.defs.instance import open_instance

    return open_instance(settings.dagster_home(), settings.warehouse_path())  # what `make dagster-home` installs


def _select(scan: Any, ids: list[str] | None) -> list[Any]:
    known = {c.checkpoint_id: c for c in scan.complete}
    if not ids:
        return sorted(known.values(), key=lambda c: (c.created_at, c.checkpoint_id))
    missing = [i for i in ids if i not in known]
    refused = [r for r in scan.refused for i in missing if f"/{i}:" in r or f"/{i}/" in r]
    if refused:
        raise CliError(f"checkpoint refused: {refused[0]}")
    if missing:
        raise CliError(f"no complete checkpoint folder for {', '.join(missing)} (see 'eval-pipeline checkpoints')")
    return [known[i] for i in ids]


def _rubrics_and_defs(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The definitions and the rubrics that load. A rubric file that does not load is said in one line and
    skipped; the others run (``args.skipped_rubrics``: the command then exits 2 if it would have exited 0). A
    rubric asked for by name that does not load, or no rubric that loads at all, is a configuration error."""
    from eval_pipeline.core.config import RubricConfigError
    from eval_pipeline.defs.build import build_definitions
    from eval_pipeline.rubrics import load_rubrics_leniently

    good, broken = load_rubrics_leniently()
    rubrics = {r.name: r for r in good}
    asked = set(args.rubric or [])
    if asked & set(broken):
        name = sorted(asked & set(broken))[0]
        raise RubricConfigError(broken[name])
    bad = sorted(asked - set(rubrics))
    if bad:
        raise CliError(f"unknown rubric(s) {', '.join(bad)}; known: {', '.join(sorted(rubrics))}")
    if not rubrics:
        raise RubricConfigError("\n".join(broken.values()) or "no rubric configs found")
    skipped = sorted(broken) if not asked else []
    for name in skipped:
        first = next((ln.strip() for ln in broken[name].splitlines()[1:] if ln.strip()), broken[name])
        print(clean(f"eval-pipeline: rubric file {name}.yaml skipped (it does not load): {first}"), file=sys.stderr)
    args.skipped_rubrics = skipped
    if not asked and skipped:
        args.rubric = sorted(rubrics)  # only the rubrics that load
    return build_definitions(lenient=True), rubrics


def _scan() -> Any:
    """The checkpoint folders of EVAL_CHECKPOINT_DIR as they are now (an ``s3://`` one mirrored first)."""
    from eval_pipeline.defs.resources import CheckpointSource

    return CheckpointSource().scan()


def cmd_run(args: argparse.Namespace) -> int:
    defs, rubrics = _rubrics_and_defs(args)
    scan = _scan()
    ckpts = _select(scan, args.checkpoint)
    if not ckpts:
        why = ""
        if scan.refused:
            more = f" (and {len(scan.refused) - 1} more)" if len(scan.refused) > 1 else ""
            why = f"; refused: {scan.refused[0]}{more}"
        raise CliError("no complete checkpoint folders found" + why)
    from eval_pipeline.console import evaluate

    return _with_skipped(args, evaluate(args, ckpts, defs, rubrics, _instance()))


def cmd_checkpoints(args: argparse.Namespace) -> int:
    from eval_pipeline.console import shorten
    from eval_pipeline.core import settings
    from eval_pipeline.defs.partitions import CHECKPOINTS
    from eval_pipeline.storage.warehouse import Warehouse

    scan = _scan()
    registered = set(_instance().get_dynamic_partitions(CHECKPOINTS.name))
    status: dict[str, str] = {}
    wh = Warehouse(settings.warehouse_path())
    if wh.exists() and wh.table_exists("main", "checkpoints"):
        from eval_pipeline.publish.overview import overview

        for row in overview(wh).checkpoints:  # the stored verdicts, the worst of the checkpoint's rubrics
            status[row["checkpoint_id"]] = row["verdict"]
    print(f"{'checkpoint':<16} {'model':<18} {'created':<22} {'parent':<12} {'verdict':<16} {'rubrics'}")
    for c in sorted(scan.complete, key=lambda c: (c.created_at, c.checkpoint_id)):
        shown = status.get(c.checkpoint_id) or ("registered" if c.checkpoint_id in registered else "new")
        print(
            clean(
                f"{c.checkpoint_id:<16} {shorten(c.model, 60):<18} {c.created_at:<22} {c.parent or '-':<12} "
                f"{shown:<16} "
                f"{', '.join(sorted(c.rubric_files))}"
            )
        )
    for name in scan.incomplete:
        print(clean(f"{name:<16} (still being written: no checkpoint.json)"))
    for reason in scan.refused:
        print(clean(f"refused: {reason}"))
    return 0


def clean_table(text: str) -> str:
    return "\n".join(clean(line) for line in text.splitlines())


def cmd_sql(args: argparse.Namespace) -> int:
    """A person's query, read-only by construction; the result as a table, CSV, JSON lines or Parquet, to
    stdout or ``--out``. A reader that closes the pipe early (``| head``) ends it quietly."""
    from eval_pipeline.core import settings
    from eval_pipeline.storage.warehouse import Warehouse

    if args.max_rows < 0:
        raise CliError("--max-rows must be 0 or more")
    if args.format == "parquet" and not args.out:
        raise CliError("--format parquet needs --out FILE (Parquet is not written to a terminal)")
    wh = Warehouse(args.warehouse or settings.warehouse_path())
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
    """A checkpoint's results as files (publish.export): one per table, and a manifest.json."""
    from eval_pipeline.core import settings
    from eval_pipeline.publish.export import export_checkpoint
    from eval_pipeline.storage.warehouse import Warehouse

    wh = Warehouse(args.warehouse or settings.warehouse_path(), read_only=True)
    if not wh.exists():
        raise CliError(f"warehouse {wh.describe()} does not exist yet: run 'eval-pipeline run' (or make demo) first")
    out = Path(args.out or f"export-{args.checkpoint}")
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
    if args.format == "csv":
        text = table.to_pandas().to_csv(index=False)  # from Arrow: a sum of integers (a decimal) stays "6"
    elif args.format == "json":
        text = "".join(json.dumps(row, default=_json_value, ensure_ascii=False) + "\n" for row in table.to_pylist())
    else:
        df = table.slice(0, args.max_rows).to_pandas()
        with pd.option_context("display.width", 200, "display.max_columns", 50, "display.max_colwidth", 80):
            text = clean_table(df.to_string(index=False)) if table.num_rows else "(no rows)"
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


def cmd_backfill(args: argparse.Namespace) -> int:

    defs, rubrics = _rubrics_and_defs(args)
    ckpts = _select(_scan(), None)
    ids = [c.checkpoint_id for c in ckpts]
    for name in (args.start, args.end):
        if name and name not in ids:
            raise CliError(f"unknown checkpoint {name!r} (see 'eval-pipeline checkpoints')")
    lo = ids.index(args.start) if args.start else 0
    hi = ids.index(args.end) + 1 if args.end else len(ids)
    if hi <= lo:
        raise CliError(f"--from {args.start} comes after --to {args.end} in creation order ({' -> '.join(ids)})")
    from eval_pipeline.console import evaluate

    return _with_skipped(args, evaluate(args, ckpts[lo:hi], defs, rubrics, _instance()))


def _with_skipped(args: argparse.Namespace, code: int) -> int:
    """A run that was otherwise clean exits 2 when a rubric file was skipped: a configuration error, said."""
    skipped = getattr(args, "skipped_rubrics", [])
    if skipped and code == 0:
        print(f"eval-pipeline: exit 2: rubric file(s) skipped: {', '.join(skipped)}", file=sys.stderr)
        return EXIT_USAGE
    return code


def cmd_ratings_template(args: argparse.Namespace) -> int:
    """A ratings CSV ready to fill: the columns the loader reads, one row per sample id of the checkpoint."""
    import csv

    from eval_pipeline.rubrics import load_rubrics

    rubrics = {r.name: r for r in load_rubrics()}
    rubric = rubrics.get(args.rubric)
    if rubric is None:
        raise CliError(f"unknown rubric {args.rubric!r}; known: {', '.join(sorted(rubrics))}")
    ckpt = {c.checkpoint_id: c for c in _scan().complete}.get(args.checkpoint)
    if ckpt is None:
        raise CliError(f"no complete checkpoint folder for {args.checkpoint!r} (see 'eval-pipeline checkpoints')")
    path = ckpt.file_for(rubric.name)
    if path is None:
        raise CliError(f"checkpoint {args.checkpoint} has no {rubric.name}.jsonl")
    from eval_pipeline.ingest.validation import validate_file

    # the valid samples only, validated as the pipeline does (ratings of others are refused)
    samples = validate_file(rubric, path, ckpt.checkpoint_id).samples
    ids: list[str] = samples[rubric.inputs.id_field].tolist()
    # what a rater reads, after the columns they fill: the worklist's sheet fields, the other inputs and the
    # response, prefixed read_ (the loader leaves them alone), formula-like text neutralised
    inputs = [
        f.name for f in rubric.inputs.fields if f.name not in (rubric.inputs.id_field, rubric.inputs.response_field)
    ]
    shown = list(dict.fromkeys([*rubric.worklists.sheet_fields, *inputs, rubric.inputs.response_field]))
    shown = [c for c in shown if c in samples.columns]
    from eval_pipeline.core import settings
    from eval_pipeline.core.ids import UnsafeIdentifierError, check_evaluator

    try:
        check_evaluator(args.evaluator)
    except UnsafeIdentifierError as exc:
        raise CliError(str(exc)) from None
    # by default where the pipeline reads ratings, so a filled-in file counts at the next run without a move; with
    # the ratings in a store (s3://), in the working folder: this machine's copy of the store is not the store
    name = f"{ckpt.checkpoint_id}-{args.evaluator}.csv"
    remote = settings.is_remote(settings.ratings_location())
    out = Path(args.out or (Path(name) if remote else settings.ratings_dir() / rubric.name / name))
    if out.exists():
        raise CliError(f"{out} exists (ratings are never overwritten): fill that one in, or give --out")
    from eval_pipeline.core.text import csv_cell

    header = ["sample_id", "evaluator", "rater_kind", "checkpoint", *rubric.rating_scales, "notes"]
    header += [f"read_{c}" for c in shown]
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for sid, row in zip(ids, samples[shown].to_dict("records")):
            context = [csv_cell(row[c] if isinstance(row[c], str) else str(row[c])) for c in shown]
            blank = [""] * len(rubric.rating_scales)
            w.writerow([sid, args.evaluator, "human", ckpt.checkpoint_id, *blank, "", *context])
    scales = ", ".join(f"{k} {s.min}-{s.max}" for k, s in rubric.rating_scales.items())
    print(
        f"wrote {out}: {len(ids)} samples; fill one score per column ({scales}); a row left empty is reported as "
        f"not rated yet. The pipeline reads {settings.ratings_location()}/{rubric.name}/*.csv at the next run"
        + (
            "; put the file there"
            if remote or out.parent.resolve() != (settings.ratings_dir() / rubric.name).resolve()
            else ""
        )
    )
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    """Warehouse upkeep (on a DuckLake: merge the small Parquet files many partition writes leave, expire
    snapshots older than the kept window, delete the files no snapshot needs any more). Readers go on reading
    meanwhile: every step is a transaction of its own."""
    from eval_pipeline.core import settings
    from eval_pipeline.storage.backend import BackendError
    from eval_pipeline.storage.warehouse import Warehouse

    wh = Warehouse(settings.warehouse_path())
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
    """The SQL that opens the warehouse read-only in a plain DuckDB (CLI or Python), offline."""
    from eval_pipeline.core import settings
    from eval_pipeline.storage.warehouse import Warehouse

    sys.stdout.write(Warehouse(args.warehouse or settings.warehouse_path()).backend.attach_sql())
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """A warehouse an earlier version made (a DuckDB file) copied into the lake EVAL_WAREHOUSE names; the file is
    only read, never changed."""
    from eval_pipeline.core import settings
    from eval_pipeline.publish.views import refresh_views
    from eval_pipeline.storage.backend import BackendError
    from eval_pipeline.storage.warehouse import Warehouse

    source = Path(args.source)
    if not source.exists():
        raise CliError(f"{source}: no such file (nothing to migrate)")
    if not source.is_file():
        raise CliError(f"{source} is not a DuckDB file")
    wh = Warehouse(settings.warehouse_path())
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


def cmd_report(args: argparse.Namespace) -> int:
    from eval_pipeline.core import settings
    from eval_pipeline.publish.report import write_report
    from eval_pipeline.storage.warehouse import Warehouse

    wh = Warehouse(args.warehouse or settings.warehouse_path())
    if not wh.exists():
        raise CliError(f"warehouse {wh.describe()} does not exist yet: run 'eval-pipeline run' first")
    path = write_report(wh, args.out)
    print(f"report written to {path}")
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eval_pipeline.publish.reference import reference

    text = reference()
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"rubric YAML reference written to {args.out}")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from eval_pipeline.core import settings
    from eval_pipeline.publish.viewer.app import serve
    from eval_pipeline.storage.warehouse import Warehouse

    # read-only (a missing warehouse is never created, a plain reader of a DuckDB file never waited on) and a short
    # lock wait: a page says the file is busy in seconds rather than failing after the writer's two minutes
    wh = Warehouse(args.warehouse or settings.warehouse_path(), read_only=True, lock_timeout_s=3)
    _port_free(args.host, args.port)
    print(f"eval-pipeline view: http://{args.host}:{args.port}/ on {wh.describe()} (Ctrl-C stops it)")
    serve(wh, args.host, args.port)
    return 0


def cmd_annotate(args: argparse.Namespace) -> int:
    """People rate in the browser, by their rubric's protocol; ratings go where the pipeline reads them."""
    import os

    from eval_pipeline.core import settings
    from eval_pipeline.publish.annotate.app import AnnotateRefused, check_binding, serve
    from eval_pipeline.storage.warehouse import Warehouse

    token = os.environ.get("EVAL_ANNOTATE_TOKEN", "").strip() or None
    try:
        check_binding(args.host, token)
    except AnnotateRefused as exc:
        raise CliError(str(exc)) from None
    _, rubrics = _rubrics_and_defs(argparse.Namespace(rubric=None))
    if settings.is_remote(settings.ratings_location()):
        raise CliError(
            f"annotate writes ratings files into a folder, and EVAL_RATINGS_DIR is {settings.ratings_location()}: "
            "run it with EVAL_RATINGS_DIR set to a folder, then copy that folder's files into the store"
        )
    wh = Warehouse(args.warehouse or settings.warehouse_path(), read_only=True, lock_timeout_s=3)
    root = settings.ratings_dir()
    _port_free(args.host, args.port)
    print(
        f"eval-pipeline annotate: http://{args.host}:{args.port}/ · ratings into {root} · on {wh.describe()} "
        "(Ctrl-C stops it)"
    )
    serve(wh, rubrics, root, args.host, args.port, token)
    return 0


def for_terminal(line: str) -> bool:
    """Whether a line of the daemon's output (or a run's it launched) is shown in `ui`'s terminal: all but
    Dagster's per-event DEBUG lines."""
    return " - DEBUG - " not in line


def _relay(stream: Any, log_path: Path) -> None:
    with open(log_path, "a", encoding="utf-8") as log:
        for line in stream:
            log.write(line)
            log.flush()
            if for_terminal(line):
                sys.stdout.write(line)
                sys.stdout.flush()


def cmd_worker(args: argparse.Namespace) -> int:
    """A worker of the distributed profile: Celery's worker on the app of ``eval_pipeline.defs.celery_app`` (the
    broker EVAL_CELERY_BROKER), one run at a time per process, until Ctrl-C or SIGTERM (a run in progress is
    finished first; a second signal stops at once)."""
    import os
    import socket

    if not os.environ.get("EVAL_CELERY_BROKER", "").strip():
        raise CliError("worker: EVAL_CELERY_BROKER is not set (the Redis URL the instance's run launcher uses)")
    name = f"{args.name or 'worker'}@{socket.gethostname()}"
    celery = [sys.executable, "-m", "celery", "-A", "eval_pipeline.defs.celery_app", "worker", "-n", name]
    celery += ["-Q", "dagster", "-c", str(args.runs), "--prefetch-multiplier", "1", "-l", args.log_level]
    celery += ["--without-gossip", "--without-mingle"]
    os.execv(sys.executable, celery)
    return 0  # not reached


def cmd_ui(args: argparse.Namespace) -> int:
    """The Dagster webserver and the project's daemon (eval_pipeline/defs/daemon.py: Dagster's daemon with a
    backfill loop of EVAL_BACKFILL_INTERVAL_SECONDS, not 30 s) on one workspace, until Ctrl-C or until either
    stops; what `dagster dev` does, with that daemon."""
    import os
    import signal
    import subprocess
    import threading
    import time

    from eval_pipeline.core import settings
    from eval_pipeline.defs.instance import backfill_limit_hint

    home = settings.dagster_home()  # DAGSTER_HOME set for both, as the CLI's runs use it
    hint = backfill_limit_hint(home / "dagster.yaml", settings.warehouse_path())
    if hint:
        print(f"eval-pipeline ui: {hint}", file=sys.stderr, flush=True)
    workspace = ["-w", args.workspace]
    _port_free(args.host, args.port)
    # each server in a process group of its own, so stopping it stops its code servers too (they would otherwise
    # wait for a missed heartbeat, 20 s or more, before ending)
    procs: dict[str, subprocess.Popen[Any]] = {
        "dagster-webserver": subprocess.Popen(
            [sys.executable, "-m", "dagster_webserver", *workspace, "-h", args.host, "-p", str(args.port)],
            start_new_session=True,
        ),
        "daemon": subprocess.Popen(
            [sys.executable, "-m", "eval_pipeline.defs.daemon", "run", *workspace],
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        ),
    }
    # the daemon's output and that of the runs it launches: every line to a log file, the terminal without the
    # runs' DEBUG events (one per step event); the whole log stays in the instance
    log_path = home / "logs" / "daemon.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    threading.Thread(target=_relay, args=(procs["daemon"].stdout, log_path), daemon=True, name="daemon-log").start()
    print(
        f"eval-pipeline ui: http://{args.host}:{args.port}/ (DAGSTER_HOME={home}; backfills "
        f"looked at every {settings.backfill_interval_seconds():g} s; runs' DEBUG events only in {log_path}; "
        "Ctrl-C stops it)",
        flush=True,
    )
    code = 0

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM as Ctrl-C: both servers are stopped, not left behind

    signal.signal(signal.SIGTERM, stop)
    try:
        while True:
            ended = {name: p.returncode for name, p in procs.items() if p.poll() is not None}
            if ended:
                name, code = next(iter(ended.items()))
                print(f"eval-pipeline ui: {name} stopped (exit {code}); stopping the other", file=sys.stderr)
                code = code or 1
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        code = 130
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for p in procs.values():  # what is left of each group (its code servers)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                time.sleep(0.5)
    return code


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    evaluating = argparse.ArgumentParser(add_help=False)
    evaluating.add_argument("--rubric", action="append", help="rubric name (repeatable; default: every rubric)")
    evaluating.add_argument("--verbose", action="store_true", help="Dagster's full log on the console")
    evaluating.add_argument("--no-fail-on-gates", action="store_true", help="exit 0 (not 3) when only gates fail")
    ap = argparse.ArgumentParser(
        prog="eval-pipeline",
        description=__doc__.splitlines()[0],
        parents=[common],
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="register and evaluate checkpoints (in-process; on the deployment's workers when EVAL_DAGSTER_URL is set)",
        parents=[common, evaluating],
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--checkpoint", action="append", help="checkpoint id (repeatable; default: all)")
    run.set_defaults(fn=cmd_run)
    ck = sub.add_parser("checkpoints", help="list checkpoint folders with their status", parents=[common])
    ck.set_defaults(fn=cmd_checkpoints)
    sql = sub.add_parser("sql", help="run a read-only SQL query on the warehouse", parents=[common])
    sql.add_argument("query")
    sql.add_argument("--warehouse", help="the warehouse (default EVAL_WAREHOUSE, or the project's lake)")
    sql.add_argument("--max-rows", type=int, default=200, help="rows shown by --format table (default 200)")
    sql.add_argument("--format", choices=("table", "csv", "json", "parquet"), default="table")
    sql.add_argument("--out", help="write the result to this file instead of stdout")
    sql.add_argument("--as-of", help="a DuckLake snapshot id or a timestamp: read the warehouse as it was then")
    sql.set_defaults(fn=cmd_sql)
    bf = sub.add_parser(
        "backfill",
        help="evaluate all checkpoints (or a range, by creation order)",
        parents=[common, evaluating],
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bf.add_argument("--from", dest="start")
    bf.add_argument("--to", dest="end")
    bf.set_defaults(fn=cmd_backfill)
    tp = sub.add_parser(
        "ratings-template", help="write a ratings CSV for a checkpoint, one row per sample", parents=[common]
    )
    tp.add_argument("--rubric", required=True)
    tp.add_argument("--checkpoint", required=True)
    tp.add_argument("--evaluator", required=True, help="who rates: fills the evaluator column and names the file")
    tp.add_argument(
        "--out", help="file to write (default: <ratings dir>/<rubric>/<checkpoint>-<evaluator>.csv, where it is read)"
    )
    tp.set_defaults(fn=cmd_ratings_template)
    at = sub.add_parser(
        "attach-sql", help="print the SQL that opens the warehouse read-only in a plain DuckDB", parents=[common]
    )
    at.add_argument("--warehouse")
    at.set_defaults(fn=cmd_attach_sql)
    mg = sub.add_parser(
        "migrate",
        help="copy a warehouse file an earlier version made into the lake (the file is unchanged)",
        parents=[common],
    )
    mg.add_argument("source", help="the DuckDB file (e.g. data/warehouse.duckdb)")
    mg.set_defaults(fn=cmd_migrate)
    ex = sub.add_parser("export", help="write a checkpoint's results as files (Parquet, CSV or JSON)", parents=[common])
    ex.add_argument("--checkpoint", required=True)
    ex.add_argument("--rubric", action="append", help="only this rubric (repeatable; default: every rubric)")
    ex.add_argument("--format", choices=["parquet", "csv", "json"], default="parquet")
    ex.add_argument("--out", help="an empty or new folder (default: ./export-<checkpoint>)")
    ex.add_argument("--warehouse", help="warehouse to read (default: EVAL_WAREHOUSE)")
    ex.set_defaults(fn=cmd_export)
    mt = sub.add_parser("maintain", help="DuckLake upkeep: merge small files, expire old snapshots", parents=[common])
    mt.add_argument("--keep-days", type=int, default=30, help="snapshots kept for time travel (default 30)")
    mt.add_argument(
        "--repair", action="store_true", help="drop the tables whose data files are gone (a re-run rebuilds them)"
    )
    mt.set_defaults(fn=cmd_maintain)
    vw = sub.add_parser(
        "view",
        help="a local results viewer: leaderboard, checkpoints, samples (reads the warehouse live)",
        parents=[common],
    )
    vw.add_argument("--port", type=int, default=8765)
    vw.add_argument("--host", default="127.0.0.1")
    vw.add_argument("--warehouse")
    vw.set_defaults(fn=cmd_view)
    an = sub.add_parser(
        "annotate",
        help="people rate samples in the browser by the rubric's protocol (pilot, calibration, remainder, spot check)",
        parents=[common],
    )
    an.add_argument("--port", type=int, default=8766)
    an.add_argument("--host", default="127.0.0.1", help="past 127.0.0.1 it needs EVAL_ANNOTATE_TOKEN")
    an.add_argument("--warehouse")
    an.set_defaults(fn=cmd_annotate)
    wk = sub.add_parser(
        "worker",
        help="a worker of the distributed profile: runs the instance's launched runs (Celery; docs/scaling.md)",
        parents=[common],
    )
    wk.add_argument("--name", help="the worker's name (default: worker), shown on the runs it executes")
    wk.add_argument("--runs", type=int, default=1, help="runs at once in this worker (default 1)")
    wk.add_argument("--log-level", default="INFO")
    wk.set_defaults(fn=cmd_worker)
    ui = sub.add_parser(
        "ui", help="the Dagster UI with the project's daemon (sensors, run queue, backfills)", parents=[common]
    )
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--workspace", default="workspace.yaml")
    ui.set_defaults(fn=cmd_ui)
    rp = sub.add_parser("report", help="write a static HTML report (one file, offline)", parents=[common])
    rp.add_argument("--out", default="reports")
    rp.add_argument("--warehouse")
    rp.set_defaults(fn=cmd_report)
    rf = sub.add_parser("reference", help="write the rubric YAML reference (from the code)", parents=[common])
    rf.add_argument("--out", default="docs/rubric-reference.md", help="a file, or - for standard output")
    rf.set_defaults(fn=cmd_reference)
    return ap


def _ours(exc: BaseException) -> bool:
    """An error of ours whose every line is the message (a rubric error lists each problem)."""
    if isinstance(exc, CliError):
        return True
    config = sys.modules.get("eval_pipeline.core.config")  # only loaded when a rubric was: --help stays light
    return config is not None and isinstance(exc, config.RubricConfigError)


def _sigterm_as_interrupt() -> None:
    """SIGTERM, from the first moment, is what Ctrl-C is: one line, exit 130 (by default it ended the process
    with no word while the command was still starting). Dagster's own handlers take over while a run executes."""
    import signal
    import threading

    from eval_pipeline.core import interrupts

    def interrupt(signum: int, frame: Any) -> None:
        interrupts.note()
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, interrupt)


def main(argv: list[str] | None = None) -> int:
    """Parse first, import what the command needs after: `--help` and a usage error cost no heavy import."""
    args = build_parser().parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        return _interrupted()
    except ServerError as exc:
        if debug:
            raise
        print(f"eval-pipeline: error: {exc}", file=sys.stderr)
        return EXIT_SERVER
    except Exception as exc:  # ours: every line of it; anything else: one clear line unless --debug
        from eval_pipeline.core import interrupts

        if interrupts.requested() and not debug:  # the signal turned into a library's error (a database closed)
            return _interrupted()
        if debug:
            raise
        if _ours(exc):
            print(f"eval-pipeline: error: {clean_table(str(exc).strip())}", file=sys.stderr)
            return EXIT_USAGE
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        from eval_pipeline.storage.lake import failure_hint

        hint = failure_hint(msg)
        if hint:
            print(f"eval-pipeline: error: {clean(hint)}", file=sys.stderr)
            return EXIT_RUN_FAILED
        print(f"eval-pipeline: error: {clean(msg)} (--debug for the traceback)", file=sys.stderr)
        return EXIT_RUN_FAILED


def _interrupted() -> int:
    print("eval-pipeline: interrupted (exit 130)", file=sys.stderr)
    return EXIT_INTERRUPTED


def entry() -> NoReturn:
    """The `eval-pipeline` command: ``main`` with SIGTERM taken as Ctrl-C from its first moment, ended without the
    interpreter's teardown (``exit_now``)."""
    _sigterm_as_interrupt()
    try:
        code = main()
    except KeyboardInterrupt:  # before main's own handling begins (its arguments still being read)
        code = _interrupted()
    exit_now(code)


if __name__ == "__main__":
    entry()
