"""The `eval-pipeline` command's first instruction: Ctrl-C and SIGTERM are noted from here on (``interrupts.note``),
before anything heavy is imported. The command's imports take seconds on a loaded machine; a signal then used to
meet Python's default handler, whose KeyboardInterrupt a library may swallow while it imports (a bare ``except:``
around an optional import), and the command went on for minutes as if nothing had been asked. Noted, the stop
holds whatever becomes of the exception: the command ends at its next check with exit 130.

Only this module and ``core.interrupts`` (the standard library alone) load before the handler is in place; the
package's ``__init__`` imports nothing of its own.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from eval_pipeline.core import interrupts

# an interrupt raised inside a callback (a weakref's, the garbage collector's) is the interrupt, noted: not a
# traceback of "Exception ignored in ..."
sys.unraisablehook = interrupts.quiet_unraisable(sys.unraisablehook)
# SIG_IGN too: a script's background command starts with SIGINT ignored (POSIX shells without job control), and
# the command took it from the moment its first run began: ignored while it started, heard after, the same Ctrl-C
# meant two things. From the first instruction on it means one: stop.
interrupts.note_from_now(ignored_too=True)


def entry() -> NoReturn:
    """`eval-pipeline`: the command (cli.app), imported once the signals are noted."""
    try:
        from eval_pipeline.cli.app import entry as command
    except KeyboardInterrupt:  # Ctrl-C while the command's modules were still loading
        import os

        sys.stderr.write("eval-pipeline: interrupted (exit 130)\n")
        sys.stderr.flush()
        os._exit(130)
    command()
