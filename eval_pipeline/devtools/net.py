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
