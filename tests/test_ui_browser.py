"""The Dagster UI in a real browser: Debian's Chromium, headless, against a webserver on localhost.

Checks that the five asset groups, the lineage graph of one group, a materialized asset's metadata
and the gate checks are shown, and saves screenshots to test-artifacts/ui/.
"""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pytest
from websockets.sync.client import connect

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.defs.runner import materialize_checkpoints
from eval_pipeline.devtools.net import free_port, wait_until_serving

from .conftest import ROOT, RUBRIC_DIR

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--window-size=1400,1000",
]
ARTIFACTS = ROOT / "test-artifacts" / "ui"
PAGE_TIMEOUT_S = 120.0  # how long a page may take to show what the test looks for, with the whole suite beside it


class Browser:
    """One headless Chromium driven over the DevTools protocol, for every page of the test. A page is read once
    it shows what the test looks for (or its time is up), in real time: `--dump-dom` with a virtual-time budget
    waited for the page's network to be idle, and with the suite running beside it one launch never came back
    (300 s, the test's whole limit)."""

    def __init__(self, profile: Path):
        port = free_port()
        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--remote-debugging-port={port}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until_serving(f"http://127.0.0.1:{port}/json/version", self.proc, timeout_s=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        self.closing = ExitStack()
        self.ws = self.closing.enter_context(connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30))
        self.calls = 0

    def call(self, method: str, **params: object) -> dict:
        self.calls += 1
        self.ws.send(json.dumps({"id": self.calls, "method": method, "params": params}))
        while True:  # events of domains never enabled do not come; anything else is not this call's answer
            message = json.loads(self.ws.recv(timeout=PAGE_TIMEOUT_S))
            if message.get("id") == self.calls:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def page_text(self, url: str, shot: Path, expect: tuple[str, ...]) -> str:
        """The page's text (tags, styles and scripts taken out) once it has every string of ``expect`` or its time
        is up, and its screenshot."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + PAGE_TIMEOUT_S
        while True:
            html = self.call("Runtime.evaluate", expression="document.documentElement.outerHTML", returnByValue=True)
            markup = html["result"].get("value") or ""  # none while the navigation replaces the document
            text = " ".join(re.sub(r"<style.*?</style>|<script.*?</script>|<[^>]+>", " ", markup, flags=re.S).split())
            if all(e in text for e in expect) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        shot.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
        return text

    def close(self) -> None:
        self.closing.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


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
            lineage = browser.page_text(
                f"{base}/locations/eval_pipeline/asset-groups/npc_dialogue", ARTIFACTS / "npc_lineage.png", assets
            )
            for asset in assets:
                assert asset in lineage
            keys = ("lines_read", "quarantined", "valid")
            meta = browser.page_text(
                f"{base}/assets/npc_dialogue/samples?partition=ckpt-0100", ARTIFACTS / "npc_samples.png", keys
            )
            for key in keys:
                assert key in meta
            gates = ("min_samples", "dimension_means", "no_regression")
            checks = browser.page_text(
                f"{base}/assets/npc_dialogue/gates?view=checks", ARTIFACTS / "npc_gate_checks.png", gates
            )
            for gate in gates:
                assert gate in checks
        finally:
            browser.close()
        assert (ARTIFACTS / "npc_lineage.png").stat().st_size > 10_000
        deadline = time.time() + 60  # the daemon beside it: its backfill loop is alive
        with dg.DagsterInstance.get() as instance:
            while "BACKFILL" not in instance.get_daemon_heartbeats() and time.time() < deadline:
                time.sleep(1)
            assert "BACKFILL" in instance.get_daemon_heartbeats(), (tmp_path / "webserver.log").read_text()[-2000:]
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    # stopping `eval-pipeline ui` stopped both servers and their code servers; a code server whose server is gone
    # stops once its heartbeat has been missing for 20 s (Dagster's --heartbeat-timeout), which with the suite
    # running beside it took more than the 30 s this waited before (once in the clean-clone suite)
    deadline = time.time() + 60
    while _dagster_processes_with(f"DAGSTER_HOME={home}") and time.time() < deadline:
        time.sleep(1)
    assert not _dagster_processes_with(f"DAGSTER_HOME={home}")


def _dagster_processes_with(env_entry: str) -> list[str]:
    """The command lines of this machine's Dagster processes (webserver, daemon, code servers) with that
    environment entry."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "dagster" in cmd and env_entry.encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append(cmd[:200])
        except OSError:
            continue
    return found
