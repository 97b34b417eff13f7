"""The project's daemon (eval_pipeline/runtime/daemon.py): Dagster's own daemon with a backfill loop that looks
every EVAL_BACKFILL_INTERVAL_SECONDS instead of every 30 s (bench/bench_ui_backfill.py: a UI backfill of 4
checkpoints 1.78x the CLI with 30 s, 1.21x with 2 s)."""

import logging
import threading
import time

import dagster as dg
import pytest
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import EmptyWorkspaceTarget
from dagster._daemon import backfill, controller
from dagster._daemon.daemon import SpanMarker

from eval_pipeline.runtime import daemon


def _iterations(seconds: float) -> int:
    """How many times Dagster's own backfill loop runs in `seconds`."""
    with dg.instance_for_test() as instance, WorkspaceProcessContext(instance, EmptyWorkspaceTarget()) as ctx:
        loop = backfill.execute_backfill_iteration_loop(
            ctx, logging.getLogger("test"), threading.Event(), until=time.time() + seconds
        )
        return sum(item is SpanMarker.START_SPAN for item in loop)


def test_the_backfill_loop_runs_at_the_projects_interval(monkeypatch):
    monkeypatch.setattr(controller, "DEFAULT_DAEMON_INTERVAL_SECONDS", controller.DEFAULT_DAEMON_INTERVAL_SECONDS)
    monkeypatch.setenv("EVAL_BACKFILL_INTERVAL_SECONDS", "0.25")
    assert daemon.set_backfill_interval() == 0.25
    assert _iterations(2.0) >= 5  # Dagster's 30 s: one iteration in 2 s


def test_a_bad_interval_is_refused(monkeypatch):
    monkeypatch.setenv("EVAL_BACKFILL_INTERVAL_SECONDS", "0")
    with pytest.raises(ValueError, match="EVAL_BACKFILL_INTERVAL_SECONDS must be > 0"):
        daemon.set_backfill_interval()


def _one_daemon(instance):
    from dagster._daemon.daemon import SchedulerDaemon

    return [SchedulerDaemon()]


def test_the_daemon_starts_its_code_server_again_at_the_projects_interval_not_every_minute(monkeypatch):
    """An idle daemon spent 14 CPU-s a minute, 9 of them starting a new code server every 60 s (Dagster's reload of
    its workspace: the definitions built anew). The project's daemon reloads every EVAL_DAEMON_RELOAD_SECONDS."""
    monkeypatch.setattr(controller, "RELOAD_WORKSPACE_INTERVAL", controller.RELOAD_WORKSPACE_INTERVAL)
    assert controller.RELOAD_WORKSPACE_INTERVAL == 60  # Dagster's own
    monkeypatch.delenv("EVAL_DAEMON_RELOAD_SECONDS", raising=False)
    assert daemon.set_reload_interval() == 300
    with (
        dg.instance_for_test() as instance,
        controller.daemon_controller_from_instance(instance, EmptyWorkspaceTarget(), gen_daemons=_one_daemon) as c,
    ):
        two_minutes_ago = time.time() - 120
        assert c.check_workspace_freshness(two_minutes_ago) == two_minutes_ago  # not reloaded
        monkeypatch.setenv("EVAL_DAEMON_RELOAD_SECONDS", "60")
        daemon.set_reload_interval()
        assert c.check_workspace_freshness(two_minutes_ago) > two_minutes_ago  # reloaded, as Dagster's would
    monkeypatch.setenv("EVAL_DAEMON_RELOAD_SECONDS", "5")
    with pytest.raises(ValueError, match="EVAL_DAEMON_RELOAD_SECONDS must be >= 10"):
        daemon.set_reload_interval()


def test_ui_keeps_the_runs_debug_events_out_of_the_terminal_and_in_a_file(tmp_path):
    """#34.6: `make ui` printed every run's DEBUG events (1,370 lines in 22 minutes): the daemon's output (and its
    runs') goes to a log file whole, and to the terminal without Dagster's per-event DEBUG lines."""
    import io

    from eval_pipeline.cli.servers import _relay

    lines = [
        "2026-11-26 07:35:37 +0000 - dagster - DEBUG - job - 1f - 17283 - RUN_START - Started execution of run\n",
        "2026-11-26 07:35:38 +0000 - dagster - INFO - job - 1f - step - warehouse written\n",
        "2026-11-26 07:35:39 +0000 - dagster.daemon.SensorDaemon - INFO - Checking for new runs for sensor\n",
        "2026-11-26 07:35:40 +0000 - dagster - ERROR - job - 1f - step - STEP_FAILURE - Execution failed\n",
    ]
    log = tmp_path / "daemon.log"
    out = io.StringIO()
    import sys

    real, sys.stdout = sys.stdout, out
    try:
        _relay(iter(lines), log)
    finally:
        sys.stdout = real
    assert log.read_text() == "".join(lines)
    assert out.getvalue() == "".join(lines[1:])
