"""Local servers for tests and benchmarks: a free port, and waiting until a URL answers."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_serving(url: str, proc: subprocess.Popen[Any] | None = None, timeout_s: float = 60.0) -> None:
    """Return once ``url`` answers; RuntimeError if ``proc`` exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{url}: the server exited with code {proc.returncode}") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {timeout_s:g} s") from None
            time.sleep(0.05)


LAUNCH_BACKFILL = """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""


def graphql(port: int, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    """One query to the Dagster webserver on this machine's ``port``, as the UI sends it; the parsed answer."""
    import json

    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        answer: dict[str, Any] = json.loads(r.read())
        return answer


def launch_partition_backfill(port: int, partitions: list[str], keys: list[list[str]]) -> str:
    """A backfill of these asset keys (paths) over these partitions, launched as the UI launches it; its id."""
    params = {"partitionNames": partitions, "assetSelection": [{"path": k} for k in keys], "fromFailure": False}
    out = graphql(port, LAUNCH_BACKFILL, {"p": params})["data"]["launchPartitionBackfill"]
    if out["__typename"] != "LaunchBackfillSuccess":
        raise RuntimeError(f"launchPartitionBackfill answered {out}")
    return str(out["backfillId"])
