"""Real servers started as this project's own processes, on free ports of 127.0.0.1, in a folder of their own:
PostgreSQL and Redis from Debian's packages, an S3-compatible store from PyPI (``moto[server]``). The tests and
``eval_pipeline.devtools.distributed`` use them; each stops its server (and removes its folder) on exit.

moto is the S3 server because it is a PyPI package (no network but the registries here), starts in a second,
speaks the S3 protocol DuckDB's httpfs uses (path-style, SigV4), and keeps objects in memory: a store that
stops loses them, as a test of a store that stops wants.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from eval_pipeline.devtools.net import free_port
from eval_pipeline.provision import postgres_initdb


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, log: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text(errors='replace')[-800:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout:.0f} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Postgres:
    port: int
    user: str = "postgres"
    # sent by clients as a real deployment's would be (the server trusts 127.0.0.1, so any is accepted): a test
    # can then look for it where it must never appear
    password: str | None = None

    def url(self, db: str) -> str:
        """SQLAlchemy URL with the psycopg2 driver (dagster-postgres; docs/design/scaling-history.md)."""
        secret = f":{self.password}" if self.password else ""
        return f"postgresql+psycopg2://{self.user}{secret}@127.0.0.1:{self.port}/{db}"

    def conninfo(self, db: str) -> str:
        secret = f" password={self.password}" if self.password else ""
        return f"dbname={db} host=127.0.0.1 port={self.port} user={self.user}{secret}"

    def create_database(self, name: str) -> None:
        import psycopg2

        con = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, dbname="postgres")
        con.autocommit = True
        con.cursor().execute(f'CREATE DATABASE "{name}"')
        con.close()


def postgres_tools() -> tuple[str, str] | None:
    """Debian's initdb and pg_ctl, or None when PostgreSQL is not installed (``make provision-postgres``)."""
    initdb = postgres_initdb()
    pg_ctl = initdb and os.path.join(os.path.dirname(initdb), "pg_ctl")
    return (initdb, pg_ctl) if initdb and pg_ctl and os.path.exists(pg_ctl) else None


@contextmanager
def postgres(databases: tuple[str, ...] = ()) -> Iterator[Postgres]:
    """A PostgreSQL server (trust authentication on 127.0.0.1, fsync off) with ``databases`` created."""
    tools = postgres_tools()
    if tools is None:
        raise RuntimeError("PostgreSQL is not installed: 'make provision-postgres' (apt-get install postgresql)")
    initdb, pg_ctl = tools
    data = Path(tempfile.mkdtemp(prefix="eval_pg_"))
    as_user: list[str] = []
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # the server refuses root: Debian's package made a postgres user
        shutil.chown(data, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    db = data / "db"

    def run(*args: str) -> None:
        subprocess.run([*as_user, *args], check=True, capture_output=True)

    run(initdb, "-D", str(db), "-A", "trust", "-U", "postgres", "--no-sync")
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    log = str(data / "server.log")
    run(pg_ctl, "-D", str(db), "-l", log, "-w", "-t", "60", "-o", options, "start")
    try:
        server = Postgres(port)
        for name in databases:
            server.create_database(name)
        yield server
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(db), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


@dataclass
class Redis:
    port: int
    password: str

    def url(self, db: int = 0) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/{db}"


@contextmanager
def redis() -> Iterator[Redis]:
    """A Redis server (Debian's ``redis-server``) with a password, nothing persisted."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed: 'make provision-distributed' (apt-get install redis-server)")
    folder = Path(tempfile.mkdtemp(prefix="eval_redis_"))
    port, password = free_port(), secrets.token_hex(12)
    log = folder / "server.log"
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    args += ["--dir", str(folder), "--requirepass", password, "--logfile", str(log)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port, proc, "redis-server", log)
        yield Redis(port, password)
    finally:
        _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class S3:
    port: int
    bucket: str
    access_key: str
    secret_key: str
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """What a process needs to reach the store (storage.objects reads these names)."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix.strip('/')}"

    def start(self) -> None:
        """Start (or start again) the server on its port; a new server holds no object: the bucket is made."""
        assert self.log is not None
        out = self.log.open("ab")
        moto = Path(sys.executable).with_name("moto_server")
        self.proc = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(self.port)], stdout=out, stderr=subprocess.STDOUT
        )
        _wait_port(self.port, self.proc, "moto_server", self.log)
        request = urllib.request.Request(f"{self.endpoint}/{self.bucket}", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()

    def put_folder(self, local: Path, prefix: str) -> int:
        """Every file below ``local`` put under ``prefix`` of the bucket (this local store takes plain PUTs, as
        it took the bucket's); the number of files."""
        files = sorted(p for p in local.rglob("*") if p.is_file())
        for path in files:
            key = f"{prefix.strip('/')}/{path.relative_to(local).as_posix()}"
            request = urllib.request.Request(
                f"{self.endpoint}/{self.bucket}/{key}", path.read_bytes(), method="PUT",
                headers={"Content-Type": "application/octet-stream"},  # a form type would be read as a form: empty
            )  # fmt: skip
            urllib.request.urlopen(request, timeout=30).close()
        return len(files)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


@contextmanager
def s3(bucket: str = "evals") -> Iterator[S3]:
    """An S3-compatible server (moto) with ``bucket`` made and credentials of its own."""
    folder = Path(tempfile.mkdtemp(prefix="eval_s3_"))
    server = S3(free_port(), bucket, "AKIA" + secrets.token_hex(8).upper(), secrets.token_urlsafe(30))
    server.log = folder / "server.log"
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
