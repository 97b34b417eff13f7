"""The distributed profile's workers reserve no run beyond those they execute (bench/bench_distributed.py measured a
busy worker taking the next run while the other idled when tasks were acknowledged on receipt)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_a_worker_acknowledges_a_run_when_it_ends_and_reserves_one_at_a_time():
    code = (
        "from eval_pipeline.runtime.celery_app import app, execute_job, resume_job\n"
        "c = app.conf\n"
        "print(c.task_acks_late, c.worker_prefetch_multiplier, execute_job.acks_late, resume_job.acks_late,"
        " c.task_reject_on_worker_lost)\n"
    )
    env = {"EVAL_CELERY_BROKER": "redis://127.0.0.1:9/0", "PATH": "/usr/bin:/bin"}  # no broker is contacted
    said = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    # late acknowledgement, a prefetch of one; a task whose child process dies is not delivered again (run monitoring
    # resumes that run instead)
    acks_late, prefetch, execute_late, resume_late, reject_on_lost = said.split()
    assert (acks_late, prefetch, execute_late, resume_late) == ("True", "1", "True", "True")
    assert reject_on_lost in ("None", "False")  # Celery's default: off


def test_a_worker_tags_its_run_only_after_the_launcher_has(monkeypatch, tmp_path):
    """The launcher tags a run with its task's id right after sending it, and Dagster writes a run's tags back whole:
    a worker's tag written before the launcher's was lost. The worker waits for the launcher's tag, then adds its own,
    and both stay."""
    import threading

    import dagster as dg
    from dagster_celery.tags import DAGSTER_CELERY_TASK_ID_TAG

    monkeypatch.setenv("EVAL_CELERY_BROKER", "redis://127.0.0.1:9/0")  # no broker is contacted
    from eval_pipeline.runtime.celery_app import tag_worker
    from eval_pipeline.runtime.runs import WORKER_TAG

    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        run = instance.add_run(dg.DagsterRun(job_name="j", run_id="r1"))
        tagging = threading.Thread(target=tag_worker, args=(instance, run.run_id, "task-1", "worker1@host"))
        tagging.start()
        tagging.join(timeout=0.5)
        assert tagging.is_alive()  # still waiting for the launcher
        assert WORKER_TAG not in instance.get_run_by_id("r1").tags
        instance.add_run_tags("r1", {DAGSTER_CELERY_TASK_ID_TAG: "task-1"})  # the launcher's write
        tagging.join(timeout=30)
        tags = instance.get_run_by_id("r1").tags
        assert (tags[DAGSTER_CELERY_TASK_ID_TAG], tags[WORKER_TAG]) == ("task-1", "worker1@host")
