"""The project's reach past Dagster's public API is one module (``runtime/dagster_private.py``), and this test fails,
naming what moved, when a Dagster release changes any of it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import dagster
import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "eval_pipeline"
ONE_MODULE = PACKAGE / "runtime" / "dagster_private.py"


def test_only_one_module_imports_dagster_private_names():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path == ONE_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.relative_to(PACKAGE)}: {n}" for n in names if n.startswith("dagster._")]
    assert not offenders, offenders


def test_the_private_names_the_project_uses_are_still_there_and_shaped_as_it_expects():
    from eval_pipeline.runtime import dagster_private as dp

    assert dagster.__version__.startswith("1.13."), dagster.__version__  # the release these were read from
    storage = dp.SqliteEventLogStorage
    missing = [m for m in dp.EVENT_LOG_MEMBERS if not callable(getattr(storage, m, None))]
    assert not missing, f"SqliteEventLogStorage lost {missing}"
    assert list(inspect.signature(storage.__init__).parameters)[:3] == ["self", "base_dir", "inst_data"]
    assert list(inspect.signature(storage.store_event).parameters) == ["self", "event"]
    assert list(inspect.signature(storage.watch).parameters) == ["self", "run_id", "cursor", "callback"]
    watchdog = inspect.signature(dp.SqliteEventLogStorageWatchdog.__init__).parameters
    assert list(watchdog)[:5] == ["self", "event_log_storage", "run_id", "callback", "cursor"], list(watchdog)
    assert callable(getattr(dp.SqliteEventLogStorageWatchdog, "_process_log", None))
    assert isinstance(dp.daemon_controller.DEFAULT_DAEMON_INTERVAL_SECONDS, (int, float))
    # runtime/daemon.py sets how often the daemon starts its code server again: the constant, read when it is used
    assert isinstance(dp.daemon_controller.RELOAD_WORKSPACE_INTERVAL, (int, float))
    freshness = inspect.getsource(dp.daemon_controller.DagsterDaemonController.check_workspace_freshness)
    assert "RELOAD_WORKSPACE_INTERVAL" in freshness and "clear_all_grpc_endpoints" in freshness
    assert isinstance(dp.INDEX_SHARD_NAME, str) and isinstance(dp.SQLITE_BUSY_TIMEOUT_SECONDS, (int, float))
    assert callable(dp.daemon_cli()) and callable(dp.create_engine) and callable(dp.event_logs_directory)
    # the event log is still a storage Dagster accepts in dagster.yaml (a ConfigurableClass)
    from eval_pipeline.runtime.event_log import EventLogStorage

    assert issubclass(EventLogStorage, dagster._core.storage.event_log.EventLogStorage)  # noqa: SLF001


def test_the_compute_log_helpers_are_started_off_the_terminal(tmp_path):
    """The tail and watch_orphans helpers Dagster starts per step are still started through the module attribute
    this project wraps (a Dagster release that starts them another way fails here, not in a terminal)."""
    import os
    import sys

    from dagster._core.execution import compute_logs

    from eval_pipeline.runtime.dagster_private import compute_log_helpers_off_the_terminal

    assert hasattr(compute_logs, "execute_posix_tail") and "subprocess.Popen" in inspect.getsource(
        compute_logs.execute_posix_tail
    )
    compute_log_helpers_off_the_terminal()
    log = tmp_path / "out.log"
    log.write_text("x\n")
    with compute_logs.execute_posix_tail(str(log), sys.stdout) as (tail_pid, watcher_pid):
        assert os.getsid(tail_pid) == tail_pid and os.getsid(watcher_pid) == watcher_pid
        assert os.getsid(tail_pid) != os.getsid(0)


def test_what_the_resuming_celery_launcher_leans_on_is_still_there():
    """runtime/celery_launcher.py mends dagster-celery's resume: it calls the library's private
    ``_launch_celery_task_run`` and sends the resume task the argument name that task takes."""
    from dagster_celery.launcher import CeleryRunLauncher
    from dagster_celery.make_app import make_app
    from dagster_celery.tasks import create_resume_job_task

    from eval_pipeline.runtime import dagster_private as dp

    launch = getattr(CeleryRunLauncher, "_launch_celery_task_run", None)
    assert callable(launch), "CeleryRunLauncher lost _launch_celery_task_run"
    assert list(inspect.signature(launch).parameters) == ["self", "run", "task_signature", "routing_key"]
    task = create_resume_job_task(make_app({"broker": "memory://", "backend": "cache+memory://"}))
    assert list(inspect.signature(task.run).parameters) == ["resume_job_args_packed"]
    assert {"job_origin", "run_id", "instance_ref", "set_exit_code_on_failure"} <= set(dp.ResumeRunArgs._fields)
    # a queued task reads as UNKNOWN with Celery's state in the message, which the launcher turns into RUNNING
    assert {"RUNNING", "UNKNOWN", "FAILED"} <= set(dp.WorkerStatus.__members__)
    assert list(inspect.signature(dp.CheckRunHealthResult).parameters)[:2] == ["status", "msg"]
    source = inspect.getsource(CeleryRunLauncher.check_run_worker_health)
    assert 'f"Unknown task status: {task_status}"' in source


@pytest.mark.slow
def test_the_compute_log_helpers_stop_when_the_step_ignores_sigterm(tmp_path):
    """A run worker started in the background without job control ignores SIGINT, and Dagster maps SIGTERM to
    SIGINT's handler: the helpers would inherit "ignore SIGTERM" and outlive the terminate that should stop them
    (found: `tail -F` processes left behind by runs, a step waiting 30 s for each). They start with SIGTERM at its
    default and stop."""
    import subprocess
    import sys

    code = f"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGINT))  # what Dagster's run worker does
from dagster._core.execution import compute_logs
from eval_pipeline.runtime.dagster_private import compute_log_helpers_off_the_terminal
compute_log_helpers_off_the_terminal()
log = {str(tmp_path / "out.log")!r}
open(log, "w").write("x\\n")
def term_ignored(pid):
    return bool(int(open(f"/proc/{{pid}}/status").read().split("SigIgn:")[1].split()[0], 16) & (1 << 14))
with compute_logs.execute_posix_tail(log, sys.stdout) as (tail_pid, watcher_pid):
    # until both helpers have started: tail is tail itself (started through a small exec shim) and the watcher
    # has SIGTERM at its default (a step lasts longer than this; a terminate before a helper's first instruction
    # finds it still ignoring SIGTERM, inherited, on a machine loaded enough to start it late)
    for _ in range(600):
        comm = open(f"/proc/{{tail_pid}}/comm").read().strip()
        if comm == "tail" and not term_ignored(watcher_pid):
            break
        time.sleep(0.05)
    ignored = term_ignored(tail_pid)
print("RESULT", comm, ignored, os.path.exists(f"/proc/{{tail_pid}}"), os.path.exists(f"/proc/{{watcher_pid}}"))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]  # a helper that outlives its terminate: Dagster waits 30 s, fails
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT")][0].split()
    assert result[1:] == ["tail", "False", "False", "False"], done.stdout + done.stderr  # TERM honoured, both gone


def test_an_evaluation_of_the_automation_conditions_reads_the_partitions_once(tmp_path):
    """``dynamic_partitions_read_once`` still serves what ``dg.evaluate_automation_conditions`` asks the instance
    for (a release that reads partitions another way would make it useless, and the command's settling slow), and
    the instance is itself again after it."""
    import dagster as dg

    from eval_pipeline.runtime.dagster_private import dynamic_partitions_read_once

    parts = dg.DynamicPartitionsDefinition(name="ck")

    @dg.asset(partitions_def=parts)
    def up() -> None: ...

    @dg.asset(partitions_def=parts, deps=[up], automation_condition=dg.AutomationCondition.eager())
    def down() -> None: ...

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("ck", ["a", "b"])
        calls: list[str] = []
        real = type(instance).get_dynamic_partitions

        def counted(partitions_def_name: str) -> list[str]:
            calls.append(partitions_def_name)
            return real(instance, partitions_def_name)

        instance.get_dynamic_partitions = counted  # type: ignore[method-assign]
        first = dg.evaluate_automation_conditions([up, down], instance)
        bare = len(calls)
        del calls[:]
        with dynamic_partitions_read_once(instance):
            dg.evaluate_automation_conditions([up, down], instance, cursor=first.cursor)
        assert bare > 1, "Dagster no longer asks the instance for dynamic partitions again and again"
        assert calls == ["ck"], calls  # once, then from the first read
        assert "get_dynamic_partitions" not in vars(instance)  # the instance's own method again
