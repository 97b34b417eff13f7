"""The distributed profile's run launcher: dagster-celery's ``CeleryRunLauncher`` with its resume mended.

dagster-celery 0.29.27 sends a resumed run to the resume task with the execute task's argument name
(``execute_job_args_packed``); the resume task takes ``resume_job_args_packed``, so Celery refuses the call and a run
whose worker died is never resumed (the daemon logs ``TypeError: _resume_job() got an unexpected keyword
argument``). This class sends the name the task takes; everything else is the library's. The house test
(``tests/house/test_dagster_private.py``) fails when dagster-celery changes what this leans on.
"""

from __future__ import annotations

from typing import Any

from dagster_celery.config import TASK_RESUME_JOB_NAME
from dagster_celery.launcher import CeleryRunLauncher
from dagster_celery.tasks import create_resume_job_task

from eval_pipeline.defs.dagster_private import ResumeRunArgs, pack_value


class ResumingCeleryRunLauncher(CeleryRunLauncher):
    """``CeleryRunLauncher`` whose ``resume_run`` reaches the resume task (run monitoring resumes a run whose
    worker died on a worker that is alive)."""

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
