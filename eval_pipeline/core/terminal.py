"""What reaches a terminal: the documented exit codes, and text made safe to print. Light on purpose (nothing
but the standard library): the CLI reads it before it knows which command it runs."""

from __future__ import annotations

EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_GATES, EXIT_INCOMPLETE, EXIT_SERVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 5, 130


def clean(text: object) -> str:
    """Text safe for a terminal: control characters (escape codes) shown escaped, never interpreted."""
    return "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode() for ch in str(text))
