"""The distributed profile's workers reserve no run beyond those they execute (bench/bench_distributed.py measured a
busy worker taking the next run while the other idled when tasks were acknowledged on receipt)."""

from __future__ import annotations

import subprocess
import sys


def test_a_worker_acknowledges_a_run_when_it_ends_and_reserves_one_at_a_time():
    code = (
        "from eval_pipeline.defs.celery_app import app, execute_job, resume_job\n"
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
