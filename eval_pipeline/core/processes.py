"""Whether a process still runs: staging tables and in-process runs left by a killed process are cleaned up."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs. One that ended but that its parent has not reaped yet (a zombie: a
    command a script started and has not waited for) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):  # no /proc (not Linux): what kill said
        return True
    return state not in ("Z", "X")
