"""The Celery application of the distributed profile's workers (``eval-pipeline worker``, which runs
``celery -A eval_pipeline.runtime.celery_app worker``): dagster-celery's run tasks (execute a run, resume a run) on the
broker ``EVAL_CELERY_BROKER`` (Redis), results in the same Redis, the queue ``dagster``; the same application
``CeleryRunLauncher`` makes from ``deploy/distributed/dagster.yaml``, so every run it sends is a task these workers
know.

A worker reserves no run beyond those it executes: a task is acknowledged when it ends (``task_acks_late``), with a
prefetch of one, so a run the instance's queue hands over goes to a worker with a free slot, never to one that is
busy while another idles (acknowledged on receipt, a busy worker's window was free again and it reserved the next
run: bench_distributed measured 0.80x for two workers). A child process that dies still acknowledges its task
(``task_reject_on_worker_lost`` stays off): run monitoring resumes that run, the broker does not deliver it again.
If a whole worker disappears, its unacknowledged task comes back after the broker's visibility time-out, and Dagster
ignores a run worker started for a run already started or finished ("Ignoring a duplicate run").

Each run a worker takes is tagged with the worker's name (``eval/worker``) before it starts, once the launcher has
tagged it with the task's id (``tag_worker``): the UI, ``eval-pipeline runs`` and the tests see which worker
executed it.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from celery.signals import task_prerun
from dagster_celery.config import DEFAULT_CONFIG
from dagster_celery.make_app import make_app
from dagster_celery.tags import DAGSTER_CELERY_TASK_ID_TAG
from dagster_celery.tasks import create_execute_job_task, create_resume_job_task

from eval_pipeline.runtime.runs import WORKER_TAG

if TYPE_CHECKING:
    import dagster as dg

QUEUE = "dagster"
LAUNCHER_WAIT_S = 10.0  # how long a worker waits for the launcher's tag before it tags the run anyway


def _broker() -> str:
    broker = os.environ.get("EVAL_CELERY_BROKER", "").strip()
    if not broker:
        raise RuntimeError("EVAL_CELERY_BROKER is not set (the Redis URL the run launcher sends runs to)")
    return broker


app = make_app(  # type: ignore[no-untyped-call]  # dagster-celery is untyped here
    app_args={
        "broker": _broker(),
        "backend": os.environ.get("EVAL_CELERY_BACKEND", "").strip() or _broker(),
        "include": [],
        "config_source": {**DEFAULT_CONFIG, "task_acks_late": True, "worker_prefetch_multiplier": 1},
        "task_default_queue": QUEUE,
    }
)
execute_job = create_execute_job_task(app)
resume_job = create_resume_job_task(app)


@task_prerun.connect  # type: ignore[untyped-decorator]  # celery is untyped
def _record_worker(task: Any = None, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    """Tag the run this task executes with the worker's name, before the run starts."""
    given = kwargs or {}
    packed = given.get("execute_job_args_packed") or given.get("resume_job_args_packed")
    if packed is None or task is None:
        return
    import dagster as dg

    from eval_pipeline.runtime.dagster_private import unpack_value  # the launcher packs the run's arguments with it

    args: Any = unpack_value(packed)  # ExecuteRunArgs or ResumeRunArgs: a run id and the instance's ref
    with dg.DagsterInstance.from_ref(args.instance_ref) as instance:
        tag_worker(instance, args.run_id, str(task.request.id), str(task.request.hostname))


def tag_worker(
    instance: dg.DagsterInstance, run_id: str, task_id: str, worker: str, wait_s: float = LAUNCHER_WAIT_S
) -> None:
    """Tag run ``run_id`` as executed by ``worker``, once the launcher has tagged it with ``task_id`` (or after
    ``wait_s``). The launcher tags the run right after it sends the task, and Dagster's ``add_run_tags`` reads a
    run's tags and writes them all back: a worker's tag written in between was lost (one run of 30 had none)."""
    deadline = time.monotonic() + wait_s
    while True:
        run = instance.get_run_by_id(run_id)
        if run is None:
            return
        if run.tags.get(DAGSTER_CELERY_TASK_ID_TAG) == task_id or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    instance.add_run_tags(run_id, {WORKER_TAG: worker})
