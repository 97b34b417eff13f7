"""Every Dagster name this project reaches past the public API for, in one place.

Five things need them: the event log that keeps its SQLite connections (``runtime/event_log.py``, a subclass of
Dagster's ``SqliteEventLogStorage``), the daemon entrypoint that shortens the backfill loop's sleep
(``runtime/daemon.py``), the Celery worker reading which run a task executes (``runtime/celery_app.py``: the arguments
dagster-celery's launcher packs), the launcher resuming a run (``runtime/celery_launcher.py``) and the command's own
evaluation of the automation conditions (``dynamic_partitions_read_once``, runtime/runner.py). Nothing else imports
``dagster._``; ``tests/house/test_dagster_private.py`` fails when a Dagster release moves, renames or reshapes any
of these, naming which.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dagster._core.event_api import EventHandlerFn
from dagster._core.events.log import EventLogEntry
from dagster._core.instance.ref import _event_logs_directory as event_logs_directory
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SqliteEventLogStorage,
    SqliteEventLogStorageWatchdog,
)
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._daemon import controller as daemon_controller
from dagster._grpc.types import ResumeRunArgs
from dagster._serdes import ConfigurableClassData, pack_value, unpack_value

# what event_log.py overrides or calls on Dagster's SQLite event log (the house test checks each exists)
EVENT_LOG_MEMBERS = (
    "store_event",
    "watch",
    "has_table",
    "_has_asset_key_col_on_connection",
    "_connect",
    "_initdb",
    "conn_string_for_shard",
)


def daemon_cli() -> Callable[..., Any]:
    """Dagster's ``dagster-daemon`` command-line entry point (imported when the daemon starts, not before)."""
    from dagster._daemon.cli import main

    return main


__all__ = [
    "EVENT_LOG_MEMBERS",
    "INDEX_SHARD_NAME",
    "CheckRunHealthResult",
    "ResumeRunArgs",
    "WorkerStatus",
    "SQLITE_BUSY_TIMEOUT_SECONDS",
    "ConfigurableClassData",
    "EventHandlerFn",
    "EventLogEntry",
    "SqliteEventLogStorage",
    "SqliteEventLogStorageWatchdog",
    "create_engine",
    "daemon_cli",
    "daemon_controller",
    "event_logs_directory",
    "pack_value",
    "unpack_value",
]


# Run a command with SIGTERM at its default: Dagster's run workers map SIGTERM to SIGINT's handler, which is "ignore"
# in a process started in the background without job control (nohup, `cmd &` in a script), and an ignored signal is
# inherited: the helper then outlives the terminate Dagster sends it (the step waits 30 s and the `tail` is left).
# GNU env resets it as its first act, before it execs the command (a Python shim would leave its start-up as a window
# in which the terminate is still ignored); elsewhere, that shim.
_TERM_AT_DEFAULT = (
    "import os, signal, sys\n"
    "for s in (signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ): signal.signal(s, signal.SIG_DFL)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


@functools.cache
def _term_at_default() -> list[str]:
    """The prefix that starts a command with SIGTERM at its default."""
    env = ["env", "--default-signal=TERM"]
    try:
        if subprocess.run([*env, "true"], capture_output=True, timeout=10).returncode == 0:
            return env
    except (OSError, subprocess.SubprocessError):
        pass
    return [sys.executable, "-c", _TERM_AT_DEFAULT]


class _OwnSessionSubprocess:
    """``subprocess`` as Dagster's compute-log module sees it, but every process it starts in a session of its own
    and with SIGTERM at its default, so the terminate that stops it always does."""

    def __init__(self, real: Any):
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def Popen(self, args: Any, *rest: Any, **kwargs: Any) -> Any:  # noqa: N802 - the name Dagster calls
        kwargs.setdefault("start_new_session", True)
        if isinstance(args, (list, tuple)) and args and signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
            args = [*_term_at_default(), *args]
        return self._real.Popen(args, *rest, **kwargs)


def compute_log_helpers_off_the_terminal() -> None:
    """Dagster mirrors a step's output with a ``tail`` process and a ``watch_orphans.py`` helper per step. Started
    in the terminal's process group, a Ctrl-C reaches them too and each helper prints a Python traceback; started in
    a session of their own they are stopped by the step that started them (as always), or by the helper when the
    step's process is gone, and a terminal's Ctrl-C reaches only the command. Idempotent."""
    from dagster._core.execution import compute_logs

    # the module's own `subprocess` import (private, not exported): the name this module exists to reach
    if not isinstance(compute_logs.subprocess, _OwnSessionSubprocess):  # type: ignore[attr-defined]
        compute_logs.subprocess = _OwnSessionSubprocess(compute_logs.subprocess)  # type: ignore[attr-defined,assignment]


@contextlib.contextmanager
def dynamic_partitions_read_once(instance: Any) -> Iterator[None]:
    """Within the block, ``instance.get_dynamic_partitions`` answers each partitions definition from its first
    read. ``dg.evaluate_automation_conditions`` writes its cursor in a partition-loading context that names the bare
    instance, and every subset it serialises asks the instance for the checkpoint partitions again: thousands of
    event-log queries an evaluation (docs/design/graph-across-checkpoints.md). The daemon's own evaluation reads
    them through a caching loader; this does the same for the command's. Nothing registers partitions during an
    evaluation."""
    read = instance.get_dynamic_partitions  # the bound method Dagster's DagsterInstance defines
    cache: dict[str, Sequence[str]] = {}

    def once(partitions_def_name: str) -> Sequence[str]:
        if partitions_def_name not in cache:
            cache[partitions_def_name] = read(partitions_def_name)
        return cache[partitions_def_name]

    instance.get_dynamic_partitions = once
    try:
        yield
    finally:
        del instance.get_dynamic_partitions
