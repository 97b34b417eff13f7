"""The `eval-pipeline` command: its parser, and one clear line (and the documented exit code) for every error;
`--debug` shows the traceback."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import NoReturn

from eval_pipeline.cli.align import ALIGN_EXIT_CODES, cmd_align
from eval_pipeline.cli.batches import cmd_batches
from eval_pipeline.cli.common import (
    EXIT_CODES,
    CliError,
    ServerError,
    clean_table,
)
from eval_pipeline.cli.evaluate import cmd_backfill, cmd_checkpoints, cmd_run
from eval_pipeline.cli.importing import add_parser as add_import_parser
from eval_pipeline.cli.people import cmd_annotate, cmd_ratings_template, cmd_reference, cmd_report, cmd_view
from eval_pipeline.cli.servers import cmd_ui, cmd_worker
from eval_pipeline.cli.warehouse import (
    cmd_attach_sql,
    cmd_compare,
    cmd_export,
    cmd_maintain,
    cmd_migrate,
    cmd_ranks,
    cmd_sql,
)
from eval_pipeline.core.terminal import (
    EXIT_INTERRUPTED,
    EXIT_RUN_FAILED,
    EXIT_SERVER,
    EXIT_USAGE,
    clean,
    exit_now,
)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    evaluating = argparse.ArgumentParser(add_help=False)
    evaluating.add_argument("--rubric", action="append", help="rubric name (repeatable; default: every rubric)")
    evaluating.add_argument("--verbose", action="store_true", help="Dagster's full log on the console")
    evaluating.add_argument("--no-fail-on-gates", action="store_true", help="exit 0 (not 3) when only gates fail")
    ap = argparse.ArgumentParser(
        prog="eval-pipeline",
        description="`eval-pipeline`: run checkpoints, list them, query the warehouse read-only, backfill.",
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
    run.add_argument(
        "--wait",
        action="store_true",
        help="with EVAL_JUDGE_MODE=batch: wait for the judge batches and finish their checkpoints (default: submit, "
        "report them pending, exit 7; the batch sensor finishes them)",
    )
    run.set_defaults(fn=cmd_run)
    ck = sub.add_parser("checkpoints", help="list checkpoint folders with their status", parents=[common])
    ck.set_defaults(fn=cmd_checkpoints)
    sql = sub.add_parser("sql", help="run a read-only SQL query on the warehouse", parents=[common])
    sql.add_argument("query", help="the query (SQL; read-only: only queries of the warehouse run)")
    sql.add_argument("--warehouse", help="the warehouse (default EVAL_WAREHOUSE, or the project's lake)")
    sql.add_argument("--max-rows", type=int, default=200, help="rows shown by --format table (default 200)")
    sql.add_argument(
        "--format",
        choices=("table", "csv", "json", "parquet"),
        default="table",
        help="how the rows are written (json: one object per line; parquet needs --out)",
    )
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
    bf.add_argument("--from", dest="start", help="the first checkpoint id to evaluate (by creation order)")
    bf.add_argument("--to", dest="end", help="the last checkpoint id to evaluate (by creation order)")
    bf.set_defaults(fn=cmd_backfill)
    tp = sub.add_parser(
        "ratings-template", help="write a ratings CSV for a checkpoint, one row per sample", parents=[common]
    )
    tp.add_argument("--rubric", required=True, help="the rubric whose dimensions the template asks for")
    tp.add_argument("--checkpoint", required=True, help="the checkpoint whose samples are listed to rate")
    tp.add_argument("--evaluator", required=True, help="who rates: fills the evaluator column and names the file")
    tp.add_argument(
        "--out", help="file to write (default: <ratings dir>/<rubric>/<checkpoint>~<evaluator>.csv, where it is read)"
    )
    tp.set_defaults(fn=cmd_ratings_template)
    at = sub.add_parser(
        "attach-sql", help="print the SQL that opens the warehouse read-only in a plain DuckDB", parents=[common]
    )
    at.add_argument("--warehouse", help="the warehouse to read (default: EVAL_WAREHOUSE, else the project's lake)")
    at.set_defaults(fn=cmd_attach_sql)
    mg = sub.add_parser(
        "migrate",
        help="copy a warehouse file an earlier version made into the lake (the file is unchanged)",
        parents=[common],
    )
    mg.add_argument("source", help="the DuckDB file (e.g. data/warehouse.duckdb)")
    mg.set_defaults(fn=cmd_migrate)
    ex = sub.add_parser("export", help="write a checkpoint's results as files (Parquet, CSV or JSON)", parents=[common])
    ex.add_argument("--checkpoint", required=True, help="the checkpoint to export")
    ex.add_argument("--rubric", action="append", help="only this rubric (repeatable; default: every rubric)")
    ex.add_argument(
        "--format", choices=["parquet", "csv", "json"], default="parquet", help="one file per table in this format"
    )
    ex.add_argument("--out", help="an empty or new folder (default: ./export-<checkpoint>-<format>)")
    ex.add_argument("--warehouse", help="warehouse to read (default: EVAL_WAREHOUSE)")
    ex.set_defaults(fn=cmd_export)
    cp = sub.add_parser(
        "compare",
        help="any two checkpoints of a rubric: B against A, with the parent comparison's paired test and margins",
        parents=[common],
    )
    cp.add_argument("a", help="the checkpoint compared against (e.g. the released one)")
    cp.add_argument("b", help="the checkpoint compared (changes are B - A)")
    cp.add_argument("--rubric", required=True, help="the rubric")
    cp.add_argument("--warehouse", help="warehouse to read (default: EVAL_WAREHOUSE)")
    cp.set_defaults(fn=cmd_compare)
    rk = sub.add_parser(
        "ranks",
        help="every checkpoint's 95 %% rank set on a score (default: the headline), among those its judge judged",
        parents=[common],
    )
    rk.add_argument("--rubric", required=True, help="the rubric")
    rk.add_argument("--score", help="a per-sample score or dimension (default: the rubric's headline)")
    rk.add_argument("--warehouse", help="warehouse to read (default: EVAL_WAREHOUSE)")
    rk.set_defaults(fn=cmd_ranks)
    add_import_parser(sub, common)
    mt = sub.add_parser("maintain", help="DuckLake upkeep: merge small files, expire old snapshots", parents=[common])
    mt.add_argument(
        "--keep-days",
        type=int,
        default=30,
        help="days of time travel kept: snapshots replaced before them are expired (default 30)",
    )
    mt.add_argument(
        "--repair", action="store_true", help="drop the tables whose data files are gone (a re-run rebuilds them)"
    )
    mt.set_defaults(fn=cmd_maintain)
    vw = sub.add_parser(
        "view",
        help="a local results viewer: leaderboard, checkpoints, samples (reads the warehouse live)",
        parents=[common],
    )
    vw.add_argument("--port", type=int, default=8765, help="the port to serve on (default 8765)")
    vw.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1: this machine only)")
    vw.add_argument("--warehouse", help="the warehouse to read (default: EVAL_WAREHOUSE, else the project's lake)")
    vw.set_defaults(fn=cmd_view)
    an = sub.add_parser(
        "annotate",
        help="people rate samples in the browser by the rubric's protocol (pilot, calibration, remainder, spot check)",
        parents=[common],
    )
    an.add_argument("--port", type=int, default=8766, help="the port to serve on (default 8766)")
    an.add_argument("--host", default="127.0.0.1", help="past 127.0.0.1 it needs EVAL_ANNOTATE_TOKEN")
    an.add_argument("--warehouse", help="the warehouse to read (default: EVAL_WAREHOUSE, else the project's lake)")
    an.set_defaults(fn=cmd_annotate)
    wk = sub.add_parser(
        "worker",
        help="a worker of the distributed profile: runs the instance's launched runs (Celery; docs/scaling.md)",
        parents=[common],
    )
    wk.add_argument("--name", help="the worker's name (default: worker), shown on the runs it executes")
    wk.add_argument("--runs", type=int, default=1, help="runs at once in this worker (default 1)")
    wk.add_argument("--log-level", default="INFO", help="the worker's log level (DEBUG, INFO, WARNING, ERROR)")
    wk.set_defaults(fn=cmd_worker)
    ui = sub.add_parser(
        "ui", help="the Dagster UI with the project's daemon (sensors, run queue, backfills)", parents=[common]
    )
    ui.add_argument("--port", type=int, default=3000, help="the Dagster UI's port (default 3000)")
    ui.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1: this machine only)")
    ui.add_argument("--workspace", default="workspace.yaml", help="Dagster's workspace file (default workspace.yaml)")
    ui.set_defaults(fn=cmd_ui)
    rp = sub.add_parser("report", help="write a static HTML report (one file, offline)", parents=[common])
    rp.add_argument("--out", default="reports", help="the folder report.html is written to (default reports/)")
    rp.add_argument("--warehouse", help="the warehouse to read (default: EVAL_WAREHOUSE, else the project's lake)")
    rp.set_defaults(fn=cmd_report)
    bt = sub.add_parser(
        "batches",
        help="the judge's Batch API batches (EVAL_JUDGE_MODE=batch): list, show one, cancel one",
        parents=[common],
    )
    bt.add_argument(
        "action",
        nargs="?",
        choices=("list", "show", "cancel"),
        default="list",
        help="list the open batches (default), show one as the provider says it stands, or cancel one",
    )
    bt.add_argument("batch", nargs="?", help="the batch id (show, cancel)")
    bt.add_argument("--all", action="store_true", help="list every batch, collected ones too")
    bt.add_argument("--warehouse", help="the warehouse to read (default: EVAL_WAREHOUSE, else the project's lake)")
    bt.set_defaults(fn=cmd_batches)
    al = sub.add_parser(
        "align",
        help="align a rubric's judge to people's ratings (a held-out share decides), list, show or adopt alignments",
        description="Align a rubric's judge to the people's ratings: candidate judges (instructions, few-shot "
        "examples, score source) are tuned by cross-validation on part of the ratings, and the best is proved on "
        "held-out ratings it never saw; it is recommended only when its gain there is beyond noise. Adopting one "
        "makes it a new judge, whose trust is decided afresh on the held-out ratings and those that come.",
        parents=[common],
        epilog=ALIGN_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    al.add_argument("--rubric", required=True, help="the rubric whose judge is aligned")
    al.add_argument("--dimension", action="append", help="a rated dimension to align on (repeatable; default: all)")
    al.add_argument("--max-candidates", type=int, help="candidates tried at most (default: the rubric's align:)")
    al.add_argument("--max-calls", type=int, help="judge calls at most, cache hits free (default: the rubric's)")
    al.add_argument("--max-cost", type=float, help="money at most, in the price table's currency")
    al.add_argument("--list", action="store_true", help="list the rubric's alignments")
    al.add_argument("--show", metavar="ID", help="print an alignment's report")
    al.add_argument("--adopt", metavar="ID", help="write a recommended alignment's judge to aligned/<rubric>.yaml")
    al.set_defaults(fn=cmd_align)
    rf = sub.add_parser("reference", help="write the rubric YAML reference (from the code)", parents=[common])
    rf.add_argument("--out", default="docs/rubric-reference.md", help="a file, or - for standard output")
    rf.set_defaults(fn=cmd_reference)
    return ap


def _ours(exc: BaseException) -> bool:
    """An error of ours whose every line is the message (a rubric error lists each problem)."""
    if isinstance(exc, CliError):
        return True
    config = sys.modules.get("eval_pipeline.core.config")  # only loaded when a rubric was: --help stays light
    if config is not None and isinstance(exc, config.RubricConfigError):
        return True
    settings = sys.modules.get("eval_pipeline.core.settings")
    return settings is not None and isinstance(exc, settings.SettingError)


def _sigterm_as_interrupt() -> None:
    """SIGTERM, from the first moment, is what Ctrl-C is: one line, exit 130 (by default it ended the process
    with no word while the command was still starting); both are noted (``interrupts.requested()``), so one that a
    library turns into an error of its own is still an interruption. Dagster's own handlers take over while a run
    executes. (The console script noted them already, at its first instruction: eval_pipeline.command.)"""
    from eval_pipeline.core import interrupts

    interrupts.note_from_now()


def main(argv: list[str] | None = None) -> int:
    """Parse first, import what the command needs after: `--help` and a usage error cost no heavy import."""
    args = build_parser().parse_args(argv)
    debug = getattr(args, "debug", False)
    if not debug:
        logging.lastResort = OneLine()
    from eval_pipeline.core import interrupts

    try:
        code = int(args.fn(args))
        # Ctrl-C or SIGTERM noted but its KeyboardInterrupt swallowed on the way (a library's bare `except:` while
        # the command started): the command was still interrupted, whatever it went on to do
        return _interrupted() if interrupts.requested() and code != EXIT_INTERRUPTED else code
    except KeyboardInterrupt:
        return _interrupted()
    except BrokenPipeError:  # whoever reads the output has what it wanted (| head): not an error, whatever command
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own flush at exit stays quiet
        return 0
    except ServerError as exc:
        if debug:
            raise
        print(f"eval-pipeline: error: {exc}", file=sys.stderr)
        return EXIT_SERVER
    except Exception as exc:  # ours: every line of it; anything else: one clear line unless --debug
        # the signal turned into a library's error (a database closed while it was being opened)
        if (interrupts.requested() or interrupts.is_interrupt(exc)) and not debug:
            return _interrupted()
        if debug:
            raise
        if _ours(exc):
            print(f"eval-pipeline: error: {clean_table(str(exc).strip())}", file=sys.stderr)
            return EXIT_USAGE
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        from eval_pipeline.storage.backends.lake import failure_hint

        hint = failure_hint(msg)
        if hint:
            print(f"eval-pipeline: error: {clean(hint)}", file=sys.stderr)
            return EXIT_RUN_FAILED
        print(f"eval-pipeline: error: {clean(msg)} (--debug for the traceback)", file=sys.stderr)
        return EXIT_RUN_FAILED
    finally:
        interrupts.reset()  # the stop was this command's: a caller that runs another in the same process goes on


class OneLine(logging.Handler):
    """What a library logs with no handler of its own to take it (Python's last resort, which prints the
    traceback): one line, the secret-shaped parts removed, never a traceback (``--debug`` keeps Python's). A record
    made by the interrupt itself (a library that logged the Ctrl-C it caught while closing a connection) is not
    shown: the command says once that it was interrupted."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[0] is not None and issubclass(record.exc_info[0], KeyboardInterrupt):
            return
        from eval_pipeline.core.settings import openai_api_key
        from eval_pipeline.judge.redact import redact

        try:
            text = (record.getMessage().strip().splitlines() or [""])[0]
        except Exception:  # noqa: BLE001 - a message whose arguments do not fit it: its template
            text = str(record.msg)
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            text += f": {type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        sys.stderr.write(clean(redact(f"{record.name}: {text}", openai_api_key() or None)) + "\n")


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
