"""This machine's processes, as a test that must leave none behind looks for them."""

from __future__ import annotations

from pathlib import Path


def processes_with(env_entry: str, command_has: str = "") -> list[str]:
    """The command lines (first 200 characters) of this machine's processes whose environment holds ``env_entry``
    (e.g. ``DAGSTER_HOME=/tmp/x``) and whose command line holds ``command_has``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if command_has in cmd and env_entry.encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append(cmd[:200])
        except OSError:
            continue
    return found
