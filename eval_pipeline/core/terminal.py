"""What reaches a terminal: the documented exit codes, and text made safe to print. Light on purpose (nothing
but the standard library): the CLI reads it before it knows which command it runs."""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn

EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_GATES, EXIT_INCOMPLETE, EXIT_SERVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 5, 130
EXIT_PENDING = 7  # judge batches still in progress: their checkpoints' verdicts are pending (not a failure)
EXIT_NOT_LEARNT = 6  # a checkpoint another run was evaluating, whose verdict the command could not learn in time


def clean(text: object) -> str:
    """Text safe for a terminal: control characters (escape codes) shown escaped, never interpreted."""
    return "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode() for ch in str(text))


def exit_now(code: int) -> NoReturn:
    """End the process without the interpreter's teardown, which frees what a run built one object at a time
    (WordNet's indexes alone are about a million objects; most of a second after the work is done, an interrupted
    command's included). Everything is closed by then (the warehouse after each use, a run's event database when
    the run ends); the exit handlers still run (logging's flush among them) and the output is flushed."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
