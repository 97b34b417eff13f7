"""`make distributed`'s command, as a person tries it: everything starts, the UI answers, the settings file is the
person's alone and holds what the docs say to source, Ctrl-C (SIGTERM) stops every process it started."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.distributed.test_two_workers import _needs_servers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _descendants(pid: int) -> set[int]:
    out: set[int] = set()
    todo = [pid]
    while todo:
        found = subprocess.run(["pgrep", "-P", str(todo.pop())], capture_output=True, text=True).stdout.split()
        todo += [int(p) for p in found]
        out |= {int(p) for p in found}
    return out


def test_the_set_up_command_starts_everything_and_stops_everything():
    _needs_servers()
    proc = subprocess.Popen(
        [sys.executable, "-m", "eval_pipeline.devtools.distributed", "--workers", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:  # until the profile says it is up, or its output ends (pytest-timeout bounds a hang)
        lines.append(line)
        if "Ctrl-C stops it all" in line:
            break
    text = "".join(lines)
    assert "Ctrl-C stops it all" in text, text[-3000:]
    ui = re.search(r"the Dagster UI: (http://127\.0\.0\.1:\d+)", text)
    env_file = re.search(r"source (\S+)", text)
    assert ui and env_file, text
    with urllib.request.urlopen(ui.group(1) + "/server_info", timeout=10) as r:
        assert r.status == 200
    settings = Path(env_file.group(1))
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600  # it holds the store's key
    exported = dict(re.findall(r"^export (\w+)='([^']*)'$", settings.read_text(), re.M))
    assert {"EVAL_DAGSTER_URL", "EVAL_WAREHOUSE", "EVAL_CELERY_BROKER", "AWS_SECRET_ACCESS_KEY"} <= set(exported)
    assert exported["AWS_SECRET_ACCESS_KEY"] not in text  # the key is in the file, never on the terminal
    started = _descendants(proc.pid)
    assert len(started) >= 5  # PostgreSQL, Redis, the store, the daemon, the webserver, the worker
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=120)
    assert "Traceback" not in rest, rest[-2000:]
    left = [
        p
        for p in started
        if os.path.exists(f"/proc/{p}") and "zombie" not in Path(f"/proc/{p}/status").read_text().lower()
    ]
    assert left == [], [Path(f"/proc/{p}/cmdline").read_bytes()[:100] for p in left]
    assert not settings.parent.exists()  # its folder removed with it
