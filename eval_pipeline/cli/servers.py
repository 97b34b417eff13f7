"""`worker`, `ui`: the processes a deployment runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.cli.common import CliError, Parents, Subcommands, port_free
from eval_pipeline.core import interrupts

if TYPE_CHECKING:
    import subprocess

# how long `ui` gives its servers, in all, to stop by themselves before they are killed
STOP_GRACE_S = 20.0


def for_terminal(line: str) -> bool:
    """Whether a line of the daemon's output (or a run's it launched) is shown in `ui`'s terminal: all but
    Dagster's per-event DEBUG lines."""
    return " - DEBUG - " not in line


def _relay(stream: Iterable[str], log_path: Path) -> None:
    with open(log_path, "a", encoding="utf-8") as log:
        for line in stream:
            log.write(line)
            log.flush()
            if for_terminal(line):
                sys.stdout.write(line)
                sys.stdout.flush()


def cmd_worker(args: argparse.Namespace) -> int:
    """A worker of the distributed profile: runs the instance's launched runs (Celery; docs/scaling.md).

    A worker of the distributed profile: Celery's worker on the app of ``eval_pipeline.runtime.celery_app`` (the
    broker EVAL_CELERY_BROKER), one run at a time per process, until Ctrl-C or SIGTERM (a run in progress is
    finished first; a second signal stops at once)."""
    import os
    import socket

    if not os.environ.get("EVAL_CELERY_BROKER", "").strip():
        raise CliError("worker: EVAL_CELERY_BROKER is not set (the Redis URL the instance's run launcher uses)")
    name = f"{args.name or 'worker'}@{socket.gethostname()}"
    celery = [sys.executable, "-m", "celery", "-A", "eval_pipeline.runtime.celery_app", "worker", "-n", name]
    celery += ["-Q", "dagster", "-c", str(args.runs), "--prefetch-multiplier", "1", "-l", args.log_level]
    celery += ["--without-gossip", "--without-mingle"]
    os.execv(sys.executable, celery)
    return 0  # not reached


def cmd_ui(args: argparse.Namespace) -> int:
    """The Dagster UI with the project's daemon (sensors, run queue, backfills).

    The Dagster webserver and the project's daemon (eval_pipeline/runtime/daemon.py: Dagster's daemon with a
    backfill loop of EVAL_BACKFILL_INTERVAL_SECONDS, not 30 s) on one workspace, until Ctrl-C or until either
    stops; what `dagster dev` does, with that daemon."""
    import subprocess
    import threading

    from eval_pipeline.core import settings
    from eval_pipeline.runtime.instance import backfill_limit_hint, open_instance

    home = settings.dagster_home()  # DAGSTER_HOME set for both, as the CLI's runs use it
    hint = backfill_limit_hint(home / "dagster.yaml")
    if hint:
        print(f"eval-pipeline ui: {hint}", file=sys.stderr, flush=True)
    port_free(args.host, args.port)
    workspace = ["-w", args.workspace]
    procs: dict[str, subprocess.Popen[str]] = {}
    # Ctrl-C and SIGTERM handled as one request from before the first server starts: none raises, so none can land
    # between the request and the clean-up and leave the servers running
    with interrupts.stopping() as stop:
        try:
            # the instance's databases made here, once: the webserver and the daemon opening an empty DAGSTER_HOME
            # at the same moment both stamp its schemas, and one of them fails on the other's half-made revision table
            open_instance(home).dispose()
            if stop.requested.is_set():
                return 130
            # each server in a process group of its own, so stopping it stops its code servers too (they would
            # otherwise wait for a missed heartbeat, 20 s or more, before ending)
            procs["dagster-webserver"] = subprocess.Popen(
                [sys.executable, "-m", "dagster_webserver", *workspace, "-h", args.host, "-p", str(args.port)],
                start_new_session=True,
                text=True,
            )
            procs["daemon"] = subprocess.Popen(
                [sys.executable, "-m", "eval_pipeline.runtime.daemon", "run", *workspace],
                start_new_session=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )
            # the daemon's output and that of the runs it launches: every line to a log file, the terminal without
            # the runs' DEBUG events (one per step event); the whole log stays in the instance
            log_path = home / "logs" / "daemon.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            relay = (procs["daemon"].stdout, log_path)
            threading.Thread(target=_relay, args=relay, daemon=True, name="daemon-log").start()
            print(
                f"eval-pipeline ui: http://{args.host}:{args.port}/ (DAGSTER_HOME={home}; backfills "
                f"looked at every {settings.backfill_interval_seconds():g} s; runs' DEBUG events only in {log_path}; "
                "Ctrl-C stops it)",
                flush=True,
            )
            while not stop.requested.wait(0.5):
                ended = {name: p.returncode for name, p in procs.items() if p.poll() is not None}
                if ended:
                    name, code = next(iter(ended.items()))
                    print(f"eval-pipeline ui: {name} stopped (exit {code}); stopping the other", file=sys.stderr)
                    return code or 1
            return 130
        finally:
            stop_servers(procs, stop)


def stop_servers(procs: Mapping[str, subprocess.Popen[str]], within: interrupts.Stopping | None = None) -> None:
    """Stop every server: Ctrl-C to each, up to STOP_GRACE_S in all to stop by itself, then killed; then what is
    left of each process group (its code servers, the runs they launched): SIGTERM, up to the same deadline to end,
    then SIGKILL. Bounded as a whole (a service manager waits a fixed time), not per server.

    A signal meanwhile (``within``: the ``Stopping`` the command runs under) does not cut this short, leaving
    servers behind: a second request (a person pressing Ctrl-C twice) only ends the waiting, and what is left is
    killed; the first one told twice (make forwarding its group's SIGTERM) changes nothing."""
    import signal
    import time

    with interrupts.shielded(within) as again:
        deadline = time.monotonic() + STOP_GRACE_S

        def waiting() -> bool:
            return time.monotonic() < deadline and not again.is_set()

        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        while waiting() and any(p.poll() is None for p in procs.values()):
            time.sleep(0.1)
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        groups = [p.pid for p in procs.values() if _signal_group(p.pid, signal.SIGTERM)]
        while groups and waiting():
            time.sleep(0.1)
            groups = [g for g in groups if _signal_group(g, 0)]
        for g in groups:
            _signal_group(g, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send a signal to a process group (0: only look); whether any process of it was there."""
    import os

    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def add_parsers(sub: Subcommands, parents: Parents) -> None:
    """This module's commands, on the command's parser."""
    wk = parents.command(sub, cmd_worker)
    wk.add_argument("--name", help="the worker's name (default: worker), shown on the runs it executes")
    wk.add_argument("--runs", type=int, default=1, help="runs at once in this worker (default 1)")
    wk.add_argument("--log-level", default="INFO", help="the worker's log level (DEBUG, INFO, WARNING, ERROR)")
    ui = parents.command(sub, cmd_ui)
    ui.add_argument("--port", type=int, default=3000, help="the Dagster UI's port (default 3000)")
    ui.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1: this machine only)")
    ui.add_argument("--workspace", default="workspace.yaml", help="Dagster's workspace file (default workspace.yaml)")
