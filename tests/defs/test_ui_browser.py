"""The Dagster UI in a real browser: Debian's Chromium, headless, against a webserver on localhost.

Checks that the five asset groups, the lineage graph of one group, a materialized asset's metadata
and the gate checks are shown, and saves screenshots to test-artifacts/ui/.
"""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.devtools.net import free_port, wait_until_serving
from eval_pipeline.runtime.runner import materialize_checkpoints
from tests.conftest import ROOT, RUBRIC_DIR
from tests.helpers.browser import ARTIFACTS, CHROMIUM, Browser
from tests.helpers.processes import processes_with, stop
from tests.helpers.waiting import poll


@pytest.mark.slow
def test_ui_shows_groups_lineage_metadata_and_checks(tmp_path, checkpoint_root, monkeypatch):
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed: 'make test' provisions it (apt-get install chromium)")
        pytest.skip("Chromium not installed (run 'make provision-browser')")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    warehouse = str(tmp_path / "w.duckdb")
    env = dict(os.environ, DAGSTER_HOME=str(home), EVAL_WAREHOUSE=warehouse, EVAL_CHECKPOINT_DIR=str(checkpoint_root))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    defs = build_definitions(RUBRIC_DIR, warehouse, str(checkpoint_root))
    with dg.DagsterInstance.get() as instance:
        assert materialize_checkpoints(defs, instance, ["ckpt-0100"], {"npc_dialogue", "kg_qa"})[0].success
    port = free_port()
    log = open(tmp_path / "webserver.log", "w")  # a file, not an unread pipe that could fill and stall the server
    server = subprocess.Popen(  # what `make ui` runs: the webserver and the project's daemon
        [
            str(Path(sys.executable).with_name("eval-pipeline")),
            "ui",
            "--workspace",
            str(ROOT / "workspace.yaml"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(f"{base}/server_info", server, timeout_s=60)
        except RuntimeError as exc:
            pytest.fail(
                f"the Dagster webserver did not start: {exc}\n{(tmp_path / 'webserver.log').read_text()[-2000:]}"
            )
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser = Browser(tmp_path / "chromium")
        try:
            names = ("npc_dialogue", "kg_qa", "empathetic_dialogue", "answer_quality", "roleplay_style")
            groups = browser.page_text(f"{base}/asset-groups", ARTIFACTS / "asset_groups.png", names)
            for g in names:
                assert g in groups
            assets = ("raw_outputs", "samples", "judge_scores", "metrics", "scores", "agreement", "gates")
            assets += ("calibration_pool", "checkpoint_lineage")
            # the group is a layer deeper with its pools, and the UI draws it around its centre at a readable zoom:
            # a window big enough for every asset of it, for this page alone
            big = {"width": 4800, "height": 3600, "deviceScaleFactor": 1, "mobile": False}
            browser.call("Emulation.setDeviceMetricsOverride", **big)
            lineage = browser.page_text(
                f"{base}/locations/eval_pipeline/asset-groups/npc_dialogue", ARTIFACTS / "npc_lineage.png", assets
            )
            browser.call("Emulation.clearDeviceMetricsOverride")
            for asset in assets:
                assert asset in lineage
            # the pool between checkpoints (#59): what it reads of every checkpoint, and who reads it
            around = ("calibration_pool", "judge_scores", "human_ratings", "samples", "agreement")
            pool = browser.page_text(
                f"{base}/assets/npc_dialogue/calibration_pool?view=lineage", ARTIFACTS / "pool_lineage.png", around
            )
            for asset in around:
                assert asset in pool
            keys = ("lines_read", "quarantined", "valid")
            meta = browser.page_text(
                f"{base}/assets/npc_dialogue/samples?partition=ckpt-0100", ARTIFACTS / "npc_samples.png", keys
            )
            for key in keys:
                assert key in meta
            gates = ("min_samples", "dimension_means", "no_regression")
            checks = browser.page_text(
                f"{base}/assets/npc_dialogue/summary?view=checks", ARTIFACTS / "npc_gate_checks.png", gates
            )
            for gate in gates:
                assert gate in checks
        finally:
            browser.close()
        assert (ARTIFACTS / "npc_lineage.png").stat().st_size > 10_000
        assert (ARTIFACTS / "pool_lineage.png").stat().st_size > 10_000
        with dg.DagsterInstance.get() as instance:  # the daemon beside it: its backfill loop is alive
            poll(lambda: "BACKFILL" in instance.get_daemon_heartbeats(), 60, every=1)
            assert "BACKFILL" in instance.get_daemon_heartbeats(), (tmp_path / "webserver.log").read_text()[-2000:]
    finally:
        stop(server)
        log.close()
    # stopping `eval-pipeline ui` stopped both servers and their code servers; a code server whose server is gone
    # stops once its heartbeat has been missing for 20 s (Dagster's --heartbeat-timeout), which with the suite
    # running beside it took more than the 30 s this waited before (once in the clean-clone suite)
    poll(lambda: not processes_with(f"DAGSTER_HOME={home}", "dagster"), 60, every=1)
    assert not processes_with(f"DAGSTER_HOME={home}", "dagster")
