"""What the commands share: their errors, the instance, the rubrics and definitions, the checkpoint scan."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from eval_pipeline.core.terminal import (
    EXIT_USAGE,
    clean,
)

if TYPE_CHECKING:  # Dagster and the rubric model only for the annotation: the CLI imports them when it runs
    import dagster as dg

    from eval_pipeline.core.config import RubricConfig

EXIT_CODES = """exit codes:
  0    every checkpoint evaluated, every gate passed, the data complete
  1    a run failed (the failed step and its error are printed)
  2    a usage or configuration error (bad arguments, an invalid rubric YAML); a rubric file that does not
       load is skipped in one line and the others run: the command exits 2 when it would have exited 0
  3    gates failed (--no-fail-on-gates: exit 0 instead)
  4    incomplete data (judge scores missing, lines quarantined or rating rows rejected above the rubric's
       completeness thresholds, or a rating file rejected whole)
  5    a server could not start (`view`, `ui`: the port is in use or cannot be bound)
  6    a verdict could not be learnt: a selected checkpoint was being evaluated by another run that had not ended
       within EVAL_WAIT_FOR_RUN seconds (default 1800), or its verdict was decided again by another run before this
       command read it (another run's verdict, once learnt, gives its code)
  7    judge batches in progress (EVAL_JUDGE_MODE=batch): the checkpoints that wait on them are `pending judge`,
       nothing failed; the batch sensor (or `eval-pipeline run --wait`) finishes them when the provider answers
  130  interrupted (Ctrl-C): what finished is listed, nothing further starts
"""


class ServerError(Exception):
    """A server of ours could not start."""


def port_free(host: str, port: int) -> None:
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


def dagster_instance() -> Any:  # a DagsterInstance (dagster imported only when a command needs it)
    from eval_pipeline.core import settings
    from eval_pipeline.runtime.instance import open_instance

    return open_instance(settings.dagster_home())  # what `make dagster-home` installs


def select_checkpoints(scan: Any, ids: list[str] | None) -> list[Any]:
    known = {c.checkpoint_id: c for c in scan.complete}
    if not ids:
        return sorted(known.values(), key=lambda c: (c.created_at, c.checkpoint_id))
    missing = [i for i in ids if i not in known]
    refused = [r for r in scan.refused for i in missing if f"/{i}:" in r or f"/{i}/" in r]
    if refused:
        raise CliError(f"checkpoint refused: {refused[0]}")
    if missing:
        where = f" in {scan.root} (EVAL_CHECKPOINT_DIR)" if getattr(scan, "root", None) else ""
        unfinished = [i for i in missing if i in getattr(scan, "incomplete", [])]
        why = f"; {', '.join(unfinished)} has no checkpoint.json yet" if unfinished else ""
        raise CliError(
            f"no complete checkpoint folder for {', '.join(missing)}{where}{why} (see 'eval-pipeline checkpoints')"
        )
    return [known[i] for i in ids]


def judge_settings_or_stop() -> None:
    """The judge's settings as the run's steps will read them, checked before anything starts: a misspelt
    EVAL_JUDGE or a value that is not a number is a configuration error now (exit 2), not a failed step later."""
    import difflib

    from eval_pipeline.core import settings
    from eval_pipeline.judge.backends import BACKENDS

    try:
        config = settings.judge_config()
    except ValueError as exc:
        raise CliError(f"judge settings: {exc}") from None
    if config.mode not in BACKENDS:
        near = difflib.get_close_matches(config.mode, list(BACKENDS), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise CliError(
            f"EVAL_JUDGE={config.mode!r} is no judge backend{hint}: use one of {', '.join(sorted(BACKENDS))}"
        )


def rubrics_and_defs(args: argparse.Namespace) -> tuple[dg.Definitions, dict[str, RubricConfig]]:
    """The definitions and the rubrics that load. A rubric file that does not load is said in one line and
    skipped; the others run (``args.skipped_rubrics``: the command then exits 2 if it would have exited 0). A
    rubric asked for by name that does not load, or no rubric that loads at all, is a configuration error."""
    from eval_pipeline.core.config import RubricConfigError
    from eval_pipeline.defs.build import build_definitions
    from eval_pipeline.rubrics import load_rubrics_leniently

    judge_settings_or_stop()
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


def scan_checkpoint_folders() -> Any:
    """The checkpoint folders of EVAL_CHECKPOINT_DIR as they are now (an ``s3://`` one mirrored first)."""
    from eval_pipeline.defs.resources import CheckpointSource

    return CheckpointSource().scan()


def clean_table(text: str) -> str:
    return "\n".join(clean(line) for line in text.splitlines())


def with_skipped(args: argparse.Namespace, code: int) -> int:
    """A run that was otherwise clean exits 2 when a rubric file was skipped: a configuration error, said."""
    skipped = getattr(args, "skipped_rubrics", [])
    if skipped and code == 0:
        print(f"eval-pipeline: exit 2: rubric file(s) skipped: {', '.join(skipped)}", file=sys.stderr)
        return EXIT_USAGE
    return code


Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"  # what `add_subparsers` returns
Command: TypeAlias = "Callable[[argparse.Namespace], int]"


@dataclass(frozen=True)
class Parents:
    """The options commands share: every command's (``common``: --debug), the evaluating commands' (``evaluating``:
    --rubric, --verbose, --no-fail-on-gates) and those of the commands that read a warehouse (``reading``)."""

    common: argparse.ArgumentParser
    evaluating: argparse.ArgumentParser
    reading: argparse.ArgumentParser  # the commands that read a warehouse: --warehouse

    @classmethod
    def make(cls) -> Parents:
        common = argparse.ArgumentParser(add_help=False)
        common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
        evaluating = argparse.ArgumentParser(add_help=False)
        evaluating.add_argument("--rubric", action="append", help="rubric name (repeatable; default: every rubric)")
        evaluating.add_argument("--verbose", action="store_true", help="Dagster's full log on the console")
        evaluating.add_argument("--no-fail-on-gates", action="store_true", help="exit 0 (not 3) when only gates fail")
        reading = argparse.ArgumentParser(add_help=False)
        reading.add_argument(
            "--warehouse", help="the warehouse to read (default: EVAL_WAREHOUSE, else the project's lake)"
        )
        return cls(common, evaluating, reading)

    def command(
        self,
        sub: Subcommands,
        fn: Command,
        *,
        help: str | None = None,  # noqa: A002 - argparse's own word
        reads: bool = False,
        evaluates: bool = False,
        epilog: str | None = None,
        description: str | None = None,
    ) -> argparse.ArgumentParser:
        """The parser of the command ``fn`` runs, named after it (``cmd_attach_sql``: ``attach-sql``), its help the
        first paragraph of ``fn``'s docstring (or ``help``), with the options it shares: every command's; ``reads``:
        the warehouse it reads; ``evaluates``: the evaluating options, and the exit codes as its epilog.
        ``description``: the text of its own --help."""
        name = fn.__name__.removeprefix("cmd_").replace("_", "-")
        if help is None:
            summary = (fn.__doc__ or "").split("\n\n")[0]
            help = " ".join(summary.split()).rstrip(".")
            first = help.split(" ", 1)[0]
            help = help if first[1:] != first[1:].lower() else help[:1].lower() + help[1:]  # a name ("DuckLake") stays
        help = help.replace("%", "%%")
        parents = [self.common, *([self.evaluating] if evaluates else []), *([self.reading] if reads else [])]
        epilog = epilog or (EXIT_CODES if evaluates else None)
        formatter = argparse.RawDescriptionHelpFormatter if epilog else argparse.HelpFormatter
        parser = sub.add_parser(
            name, help=help, description=description, parents=parents, epilog=epilog, formatter_class=formatter
        )
        parser.set_defaults(fn=fn)
        return parser
