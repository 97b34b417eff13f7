"""The distributed profile, for real: PostgreSQL (instance and lake catalog), Redis (Celery's broker), an
S3-compatible store (moto: the lake's rows, the checkpoints, the ratings, the worklists), the webserver, the daemon
and two Celery workers, each in a folder of its own with its own HOME (eval_pipeline.devtools.distributed).

What a team moving off one machine checks: the same command evaluates the same checkpoints to the same tables as
on one machine; both workers take runs; a worker that dies mid-run loses nothing; no secret shows anywhere."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs.automation import settling
from eval_pipeline.defs.inflight import RANGE_END, RANGE_START
from eval_pipeline.devtools import distributed, services
from eval_pipeline.storage.warehouse import Warehouse
from tests.helpers.lakes import contents, contents_under, differences
from tests.helpers.reference import reference_tables
from tests.helpers.waiting import poll

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("eval-pipeline"))
# where a checkpoint came from is where it landed (a folder here, s3://… there): not what was evaluated
WHERE = {"main.checkpoints": ["path"]}


def _needs_servers() -> None:
    missing = [
        n
        for n, ok in (("PostgreSQL", services.postgres_tools()), ("redis-server", shutil.which("redis-server")))
        if not ok
    ]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{', '.join(missing)} not installed: 'make test' provisions them (make provision-distributed)")
        pytest.skip(f"{', '.join(missing)} not installed (run 'make provision-distributed')")


def _lasting(tables: dict) -> dict:
    return {t: df.drop(columns=WHERE.get(t, [])) for t, df in tables.items()}


def _cluster_tables(c: distributed.Cluster) -> dict:
    env = c.process_env("you")
    return contents_under(env["EVAL_WAREHOUSE"], {**os.environ, **{k: env[k] for k in c.env()}}, WHERE)


@pytest.fixture(scope="module")
def one_machine():
    """The same evaluation with the default embedded profile, in a project folder of its own: the suite's
    reference lake (tests/helpers/reference.py), evaluated once per content of the code and data."""
    return _lasting(reference_tables())


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """The cluster (checkpoint sensor stopped: only what the command submits runs), the sample checkpoints and
    ratings in its store, and `eval-pipeline run` typed by a person whose machine shares nothing with the workers."""
    _needs_servers()
    with distributed.cluster(workers=2, folder=tmp_path_factory.mktemp("cluster"), sensor=False) as c:
        c.upload_samples(ROOT / "data" / "checkpoints", ROOT / "data" / "human_ratings")
        you = c.process_env("you")
        done = subprocess.run(
            [CLI, "run", "--no-fail-on-gates"], cwd=c.folder / "you", env=you, capture_output=True, text=True
        )
        yield c, done


def _runs(c: distributed.Cluster, settled: bool = True) -> list[dg.DagsterRun]:
    """The deployment's runs, read once it has settled (defs/automation.py: nothing in flight, the automation
    sensor evaluated after the last run ended and asked for nothing; at most 300 s)."""
    env = c.process_env("you")
    saved = dict(os.environ)
    try:
        os.environ.update({k: env[k] for k in (*c.env(), "DAGSTER_HOME")})
        with dg.DagsterInstance.get() as instance:
            if settled:
                poll(lambda: settling(instance).settled, 300, every=1)
            return list(instance.get_runs())
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_three_checkpoints_on_two_workers_make_the_tables_one_machine_makes(evaluated, one_machine):
    c, done = evaluated
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "3 checkpoint(s) evaluated" in done.stdout
    runs = _runs(c)
    # #70: the command's runs, one per rubric over the three checkpoints (a range: the backfill policy), each deciding
    # across the three at its end; all done, every one on a worker. The automation finds nothing stale after them.
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs), [r.status for r in runs]
    mine = [r for r in runs if "eval/rubrics" in r.tags and "eval/purpose" not in r.tags]
    ranges = {(r.tags.get(RANGE_START), r.tags.get(RANGE_END), r.tags["eval/rubrics"]) for r in mine}
    assert len(mine) == 5 and {(a, b) for a, b, _ in ranges} == {("ckpt-0100", "ckpt-0300")}, sorted(ranges)
    automated = [r for r in runs if r.tags.get("dagster/sensor_name") == "redecide_sensor"]
    # the deployment's ratings sensor may read a checkpoint's ratings once more if it ticks while the command's run
    # of that checkpoint has not yet recorded what it read (a run of human_ratings alone: no judge call)
    sensed = [r for r in runs if r.tags.get("eval/purpose") == "ratings changed"]
    assert all(r.asset_selection and all(k.path[-1] == "human_ratings" for k in r.asset_selection) for r in sensed)
    assert len(automated) + len(mine) + len(sensed) == len(runs)
    workers = {r.tags.get("eval/worker", "").split("@")[0] for r in runs}
    assert workers == {"worker1", "worker2"}, workers  # both took runs, nothing ran elsewhere
    mine = _cluster_tables(c)
    assert len(mine) >= 90, sorted(mine)  # every rubric's tables, the views, the quarantine
    assert differences(one_machine, mine) == []
    # the worklists reached the store, not a folder of the worker that wrote them
    listed = subprocess.run(
        [sys.executable, "-c", "from eval_pipeline.storage import objects as o; import sys; "
         "print(len(o.list_files(sys.argv[1])))", c.s3.url("worklists")],
        env=c.process_env("you"), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert int(listed.stdout) >= 15 * 4  # 3 checkpoints x 5 rubrics, four CSVs each


def test_a_worker_killed_mid_run_is_resumed_and_loses_nothing(evaluated, one_machine):
    """SIGKILL to the process executing a run (a worker's pool process, as the OOM killer would): Celery reports
    the task lost, the daemon's run monitoring resumes the run on a worker that is alive, the tables end as one
    machine makes them (no row twice), no run is left stuck, and the console says what happened."""
    c, first = evaluated
    assert first.returncode == 0
    you = c.process_env("you")
    cmd = [CLI, "run", "--checkpoint", "ckpt-0200", "--no-fail-on-gates"]
    proc = subprocess.Popen(
        cmd, cwd=c.folder / "you", env=you, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    victim = None

    def taken() -> bool:  # the run taken by a worker and a step under way
        nonlocal victim
        for r in _runs(c, settled=False):
            if (
                victim is None
                and r.tags.get("dagster/partition") == "ckpt-0200"
                and r.status == dg.DagsterRunStatus.STARTED
            ):
                name = r.tags.get("eval/worker", "").split("@")[0]
                if name:
                    master = c.procs[name].pid
                    children = subprocess.run(
                        ["pgrep", "-P", str(master)], capture_output=True, text=True
                    ).stdout.split()
                    victim = int(children[0]) if children else None
        return victim is not None

    poll(taken, 180, every=0.5)
    assert victim is not None, "no run of ckpt-0200 started on a worker within 180 s"
    time.sleep(2)  # a step under way
    os.kill(victim, signal.SIGKILL)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    assert "its worker died 1 time(s); resumed by the daemon's run monitoring, finished on worker" in out, out[-3000:]
    runs = _runs(c)
    live = [
        (r.run_id[:8], r.status.value, dict(r.tags), sorted(k.to_user_string() for k in r.asset_selection or ()))
        for r in runs
        if r.status not in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)
    ]
    assert not live
    assert differences(one_machine, _cluster_tables(c)) == []


def test_no_secret_of_the_deployment_appears_anywhere(evaluated):
    """The store's secret key, PostgreSQL's password and the Redis password (in the broker URL): not in any table
    of the warehouse, the instance's runs and events, any process's log or what the command printed."""
    c, done = evaluated
    secrets = {
        "S3 secret key": c.s3.secret_key,
        "PostgreSQL password": c.pg.password,
        "Redis password": c.redis.password,
    }
    places = {"the command's output": done.stdout + done.stderr}
    for name in c.procs:
        places[f"{name}'s log"] = c.log(name)
    import psycopg2

    con = psycopg2.connect(host="127.0.0.1", port=c.pg.port, user="postgres", dbname="dagster")
    cur = con.cursor()
    for table in ("runs", "event_logs", "run_tags", "instigators", "jobs"):
        cur.execute(f"SELECT * FROM {table}")
        places[f"the instance's {table}"] = repr(cur.fetchall())
    con.close()
    env = c.process_env("you")
    saved = dict(os.environ)
    try:
        os.environ.update({k: env[k] for k in c.env()})
        for table, df in contents(Warehouse(env["EVAL_WAREHOUSE"]), every_column=True).items():
            places[f"the warehouse's {table}"] = df.to_csv()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    found = [
        f"{what} in {where}"
        for what, value in secrets.items()
        for where, text in places.items()
        if value and value in text
    ]
    assert found == []
    assert len(places) > 100
