"""This machine's processes, as a test that must leave none behind looks for them."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


def as_from_a_terminal() -> None:
    """``preexec_fn`` for a command a test starts as a person would from a terminal: Ctrl-C and SIGTERM at their
    defaults. Otherwise the child inherits whatever the test worker has ignored (a background `make test` starts
    with SIGINT ignored), and a test about signals asserts the worker's state instead of the command's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


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


def stop(proc: subprocess.Popen, grace: float = 60) -> int:
    """Stop ``proc`` as a person would: SIGTERM, ``grace`` seconds to end its work, then SIGKILL. Returns its exit
    code. A test's clean-up must not fail the test because a loaded machine took longer than ``grace`` to shut a
    server down (the daemon's threads finish their tick first); whether a server stops on SIGTERM is asserted by
    the tests about stopping, not here."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _kill(proc)
    return proc.wait()


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``, and its whole group when it leads one (``start_new_session=True``): what it started goes
    with it."""
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
            return
    except ProcessLookupError:
        return
    proc.kill()
