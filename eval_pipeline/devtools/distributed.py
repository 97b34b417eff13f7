"""The distributed profile on one machine: PostgreSQL (the Dagster instance and the lake's catalog), Redis (the
Celery broker), an S3-compatible store (the lake's rows, the checkpoints, the ratings, the worklists), the Dagster
webserver and daemon, and N workers, each in a folder of its own with its own ``HOME`` and ``DAGSTER_HOME``, so
nothing passes between them but PostgreSQL, Redis and S3.

    python -m eval_pipeline.devtools.distributed [--workers 2]      (make distributed)

starts it all, copies the sample checkpoints and ratings to the store, writes the environment a person needs to
use it into ``<folder>/cluster.env`` (readable by its owner only: it holds the store's key) and waits for Ctrl-C.
``tests/distributed/`` starts the same cluster (``cluster()``). The parts, and how to run each on machines of
its own, are in docs/scaling.md ("Past one machine").
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipeline.core import interrupts, settings
from eval_pipeline.devtools import services
from eval_pipeline.devtools.net import free_port

REPO = settings.REPO_ROOT
INSTANCE_YAML = REPO / "deploy" / "distributed" / "dagster.yaml"
WORKSPACE = ["-m", "eval_pipeline.defs.definitions"]


@dataclass
class Cluster:
    folder: Path
    pg: services.Postgres
    redis: services.Redis
    s3: services.S3
    webserver_port: int = 0
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    worker_names: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)  # settings every process gets besides the profile's
    slots: int = 1  # runs the workers execute at once (each worker one): what the queue hands them at most

    def env(self) -> dict[str, str]:
        """The settings every process of the cluster shares (each adds its own folders: ``process_env``)."""
        return {
            **self.s3.env(),
            "EVAL_DAGSTER_PG_URL": self.pg.url("dagster"),
            "EVAL_CELERY_BROKER": self.redis.url(),
            "EVAL_WAREHOUSE": f"ducklake:postgres:{self.pg.conninfo('lake')}",
            "EVAL_WAREHOUSE_DATA": self.s3.url("lake") + "/",
            "EVAL_CHECKPOINT_DIR": self.s3.url("checkpoints"),
            "EVAL_RATINGS_DIR": self.s3.url("ratings"),
            "EVAL_WORKLIST_DIR": self.s3.url("worklists"),
            "EVAL_DAGSTER_URL": f"http://127.0.0.1:{self.webserver_port}",
            "EVAL_WORKER_SLOTS": str(self.slots),
            **self.extra,
        }

    def process_env(self, name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of the cluster's process ``name``: its own folder as HOME, project folder (a copy of
        the rubric files: code, as on any machine it is deployed to) and DAGSTER_HOME (the profile's instance)."""
        home = self.folder / name
        if not home.exists():
            (home / "home").mkdir(parents=True)
            (home / "dagster_home").mkdir()
            shutil.copy(INSTANCE_YAML, home / "dagster_home" / "dagster.yaml")
            shutil.copytree(REPO / "rubric_configs", home / "rubric_configs")
        env = settings.without_settings(os.environ, ("EVAL_", "DAGSTER_", "AWS_"))
        env.update(self.env())
        env.update(
            HOME=str(home / "home"),
            DAGSTER_HOME=str(home / "dagster_home"),
            EVAL_PROJECT_DIR=str(home),
            EVAL_REPORT_DIR=str(home / "reports"),
            TMPDIR=str(home / "home"),
        )
        env.update(extra or {})
        return env

    def start(self, name: str, args: list[str], extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        env = self.process_env(name, extra)
        log = (self.folder / name / "process.log").open("ab")
        proc = subprocess.Popen(
            args, cwd=self.folder / name, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def start_worker(self, name: str, extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        cli = str(Path(sys.executable).with_name("eval-pipeline"))
        proc = self.start(name, [cli, "worker", "--name", name], extra)
        if name not in self.worker_names:
            self.worker_names.append(name)
        return proc

    def log(self, name: str) -> str:
        path = self.folder / name / "process.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self, name: str, sig: int = signal.SIGTERM) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, sig)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def wait_webserver(self, timeout: float = 120.0) -> None:
        url = f"http://127.0.0.1:{self.webserver_port}/server_info"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.procs.get("webserver")
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the webserver exited: {self.log('webserver')[-1500:]}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"the webserver did not answer within {timeout:.0f} s: {self.log('webserver')[-1500:]}")

    def upload_samples(self, checkpoints: Path, ratings: Path | None) -> None:
        """The sample checkpoints (and ratings) put where the cluster reads them: the store."""
        self.s3.put_folder(checkpoints, "checkpoints")
        if ratings is not None and ratings.is_dir():
            self.s3.put_folder(ratings, "ratings")


@contextmanager
def cluster(
    workers: int = 2,
    folder: Path | None = None,
    webserver: bool = True,
    sensor: bool = True,
    extra: dict[str, str] | None = None,
) -> Iterator[Cluster]:
    """The whole distributed profile on this machine, stopped (and its folder removed) on exit. The instance's
    and the lake's databases exist and the workers, the daemon and the webserver are started; no data is in the
    store yet (``Cluster.upload_samples``). ``sensor=False``: the checkpoint sensor is stopped (``dagster sensor
    stop``), so only what a command submits runs. ``extra``: settings every process gets (a judge, say)."""
    own = folder is None
    root = Path(tempfile.mkdtemp(prefix="eval_cluster_")) if folder is None else folder
    with ExitStack() as stack:
        pg = stack.enter_context(services.postgres(("dagster", "lake")))
        pg.password = secrets.token_hex(12)
        redis = stack.enter_context(services.redis())
        s3 = stack.enter_context(services.s3())
        c = Cluster(root, pg, redis, s3, webserver_port=free_port(), extra=dict(extra or {}), slots=max(1, workers))
        try:
            # the instance's tables made once, before several processes race to make them
            subprocess.run(
                [sys.executable, "-c", "import dagster as dg; dg.DagsterInstance.get().get_runs(limit=1)"],
                env=c.process_env("setup"), cwd=root / "setup", check=True, capture_output=True,
            )  # fmt: skip
            if not sensor:
                dagster = str(Path(sys.executable).with_name("dagster"))
                subprocess.run(
                    [dagster, "sensor", "stop", "checkpoint_sensor", *WORKSPACE],
                    env=c.process_env("setup"), cwd=root / "setup", check=True, capture_output=True,
                )  # fmt: skip
            for i in range(workers):
                c.start_worker(f"worker{i + 1}")
            c.start("daemon", [sys.executable, "-m", "eval_pipeline.runtime.daemon", "run", *WORKSPACE])
            if webserver:
                port = str(c.webserver_port)
                c.start(
                    "webserver", [sys.executable, "-m", "dagster_webserver", *WORKSPACE, "-h", "127.0.0.1", "-p", port]
                )
                c.wait_webserver()
            yield c
        finally:
            with interrupts.shielded():  # a second Ctrl-C or SIGTERM leaves nothing running behind
                for name in list(c.procs):
                    c.stop(name)
                stack.close()  # the store, Redis and PostgreSQL
                if own:
                    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """The profile up until Ctrl-C or SIGTERM (as Ctrl-C: the first stops it; one more while it stops does not cut
    the clean-up short, which would leave servers running)."""
    with interrupts.stopping(raises=True):
        ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        ap.add_argument("--workers", type=int, default=2)
        args = ap.parse_args()
        folder = Path(tempfile.mkdtemp(prefix="eval_cluster_"))
        try:
            with cluster(args.workers, folder) as c:
                c.upload_samples(REPO / "data" / "checkpoints", REPO / "data" / "human_ratings")
                env_file = folder / "cluster.env"
                env_file.touch(mode=0o600)
                env_file.write_text(
                    "".join(f"export {k}='{v}'\n" for k, v in c.process_env("you").items() if k in c.env())
                )
                print(f"distributed profile up in {folder}: {args.workers} workers, the daemon, the webserver")
                print(f"  the Dagster UI: http://127.0.0.1:{c.webserver_port}")
                print(f"  its settings (the store's key among them): source {env_file}")
                print("  then e.g.: eval-pipeline run --checkpoint ckpt-0100   (runs on the workers)")
                print("Ctrl-C stops it all.")
                while all(p.poll() is None for p in c.procs.values()):
                    time.sleep(1)
                dead = [n for n, p in c.procs.items() if p.poll() is not None]
                print(f"stopped: {', '.join(dead)} exited (logs in {folder})", file=sys.stderr)
        except KeyboardInterrupt:  # at any moment, starting included: everything started is stopped
            print("distributed profile: stopped", file=sys.stderr)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
