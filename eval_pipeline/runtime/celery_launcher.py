"""The distributed profile's run launcher: dagster-celery's ``CeleryRunLauncher`` with its resume mended.

Two faults of dagster-celery 0.29.27 keep a run whose worker died from being resumed:

- it sends a resumed run to the resume task with the execute task's argument name (``execute_job_args_packed``);
  the resume task takes ``resume_job_args_packed``, so Celery refuses the call (the daemon logs ``TypeError:
  _resume_job() got an unexpected keyword argument``);
- it reports a task still waiting in the queue for a free worker (Celery's ``PENDING``) as of unknown health, which
  run monitoring takes for a dead worker: it resumes the run again while the first resume waits, until the
  attempts run out and the run is marked failed under the resumes still queued.

This class sends the name the task takes and reports a queued task as running; everything else is the library's.
The house test (``tests/house/test_dagster_private.py``) fails when dagster-celery changes what this leans on.
"""

from __future__ import annotations

from typing import Any

from dagster_celery.config import TASK_RESUME_JOB_NAME
from dagster_celery.launcher import CeleryRunLauncher
from dagster_celery.tasks import create_resume_job_task

from eval_pipeline.runtime.dagster_private import CheckRunHealthResult, ResumeRunArgs, WorkerStatus, pack_value


class ResumingCeleryRunLauncher(CeleryRunLauncher):
    """``CeleryRunLauncher`` whose ``resume_run`` reaches the resume task (run monitoring resumes a run whose
    worker died on a worker that is alive)."""

    def check_run_worker_health(self, run: Any) -> Any:
        """The library's answer, except that a task waiting in the queue (``PENDING``: every worker busy) is a run
        waiting its turn, not a dead one."""
        found = super().check_run_worker_health(run)
        if found.status == WorkerStatus.UNKNOWN and "PENDING" in (found.msg or ""):
            return CheckRunHealthResult(WorkerStatus.RUNNING, "queued: waiting for a free worker")
        return found

    def resume_run(self, context: Any) -> None:
        run = context.dagster_run
        if run.job_code_origin is None:
            raise ValueError(f"run {run.run_id} has no code origin to resume it from")
        args = ResumeRunArgs(
            job_origin=run.job_code_origin,
            run_id=run.run_id,
            instance_ref=self._instance.get_ref(),
            set_exit_code_on_failure=True,
        )
        task = create_resume_job_task(self.celery)
        self._launch_celery_task_run(
            run=run,
            task_signature=task.si(resume_job_args_packed=pack_value(args)),
            routing_key=TASK_RESUME_JOB_NAME,
        )
