"""The `eval-pipeline` command: its parser, and one clear line (and the documented exit code) for every error;
`--debug` shows the traceback."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import NoReturn

import eval_pipeline.cli.align as align
import eval_pipeline.cli.batches as batches
import eval_pipeline.cli.evaluate as evaluate
import eval_pipeline.cli.importing as importing
import eval_pipeline.cli.people as people
import eval_pipeline.cli.servers as servers
import eval_pipeline.cli.warehouse as warehouse
from eval_pipeline.cli.common import EXIT_CODES, CliError, Parents, ServerError, clean_table
from eval_pipeline.core.terminal import (
    EXIT_INTERRUPTED,
    EXIT_RUN_FAILED,
    EXIT_SERVER,
    EXIT_USAGE,
    clean,
    exit_now,
)

# the command modules, each adding its commands (``add_parsers``), in the order `--help` lists them
COMMANDS = (evaluate, warehouse, importing, people, servers, batches, align)


def build_parser() -> argparse.ArgumentParser:
    """The command's parser: the options every command shares (``Parents``), then each command module's own."""
    parents = Parents.make()
    ap = argparse.ArgumentParser(
        prog="eval-pipeline",
        description="`eval-pipeline`: run checkpoints, list them, query the warehouse read-only, backfill.",
        parents=[parents.common],
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_parsers(sub, parents)
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
