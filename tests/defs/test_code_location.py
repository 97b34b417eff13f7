"""The code location loads as the webserver, the daemon and `dagster sensor ...` load it: in a code server, whose
definitions Dagster serialises (a value it cannot serialise, such as an enum of ours in an asset key, breaks every
one of them while `dagster definitions validate` and in-process runs still pass)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_the_code_location_loads_through_a_code_server(tmp_path):
    dagster = str(Path(sys.executable).with_name("dagster"))
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    done = subprocess.run(
        [dagster, "sensor", "list", "-m", "eval_pipeline.defs.definitions"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "checkpoint_sensor" in said and "Error loading" not in said
