"""Two checkpoints land at once: the sensor (in a real dagster-daemon) launches two runs, each on the
multiprocess executor, and the warehouse steps of both take turns through the duckdb_warehouse pool."""

import os
import re
import shutil
import subprocess
import sys

import dagster as dg
import pytest
from dagster._core.storage.dagster_run import DagsterRunStatus

from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import ROOT, SAMPLE_CHECKPOINTS
from tests.helpers.processes import stop
from tests.helpers.waiting import poll

HELD = re.compile(r"warehouse held from ([0-9.]+) to ([0-9.]+)")  # logged by every step of the warehouse pool


@pytest.mark.slow
@pytest.mark.timeout(600)  # the poll's 480 s and the checks: one DuckDB file for two runs and the automation's
def test_sensor_launched_concurrent_runs_take_turns_on_the_warehouse(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")  # what `make dagster-home` installs
    root = tmp_path / "checkpoints"
    for ckpt in ("ckpt-0100", "ckpt-0200"):
        (root / ckpt).mkdir(parents=True)
        for name in ("kg_qa.jsonl", "checkpoint.json"):
            shutil.copy(SAMPLE_CHECKPOINTS / ckpt / name, root / ckpt / name)
    warehouse = str(tmp_path / "w.duckdb")
    env = dict(
        os.environ,
        DAGSTER_HOME=str(home),
        EVAL_WAREHOUSE=warehouse,
        EVAL_CHECKPOINT_DIR=str(root),
        EVAL_EXECUTOR="multiprocess",
        EVAL_JUDGE="heuristic",
        EVAL_REPORT_DIR=str(tmp_path / "reports"),
    )
    log = open(tmp_path / "daemon.log", "w")
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eval_pipeline.runtime.daemon",
            "run",
            "-w",
            str(ROOT / "workspace.yaml"),
        ],  # `make ui`'s
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    try:
        with dg.DagsterInstance.get() as instance:
            runs = []

            def both_finished() -> bool:
                nonlocal runs
                # the checkpoint sensor's two runs (the automation sensor's re-decisions of the first come after)
                runs = [r for r in instance.get_runs() if r.tags.get("dagster/sensor_name") == "checkpoint_sensor"]
                return daemon.poll() is not None or (len(runs) == 2 and all(r.is_finished for r in runs))

            poll(both_finished, 480, every=2)
            assert len(runs) == 2, (
                f"expected two sensor-launched runs, got {len(runs)}; daemon log:\n"
                + (tmp_path / "daemon.log").read_text()[-3000:]
            )
            assert all(r.status == DagsterRunStatus.SUCCESS for r in runs), [(r.run_id, r.status) for r in runs]
            assert {r.tags.get("dagster/partition") for r in runs} == {"ckpt-0100", "ckpt-0200"}
            assert all(r.tags.get("dagster/sensor_name") for r in runs)  # launched by the sensor
            for r in runs:
                messages = " ".join(e.message or "" for e in instance.all_logs(r.run_id))
                assert "multiprocess" in messages.lower()
            # the two runs were in progress at the same time ...
            stats = [instance.get_run_stats(r.run_id) for r in runs]
            assert max(s.start_time for s in stats) < min(s.end_time for s in stats)
            # ... and no two warehouse steps ever had the file at the same time, within a run or across the two
            held = []
            for r in runs:
                for e in instance.all_logs(r.run_id):
                    m = HELD.search(e.message or "")
                    if m:
                        held.append((float(m.group(1)), float(m.group(2)), e.step_key, r.run_id[:8]))
            held.sort()
            assert len(held) >= 2 * 10
            for (s1, e1, k1, r1), (s2, e2, k2, r2) in zip(held, held[1:]):
                assert e1 <= s2, f"{r1}:{k1} [{s1:.3f}, {e1:.3f}] overlaps {r2}:{k2} [{s2:.3f}, {e2:.3f}]"
    finally:
        stop(daemon)
        log.close()
    wh = Warehouse(warehouse)
    assert wh.query_rows("SELECT checkpoint_id, count(*) FROM kg_qa.samples GROUP BY 1 ORDER BY 1") == [
        ("ckpt-0100", 60),
        ("ckpt-0200", 60),
    ]
    assert wh.query_rows(
        "SELECT count(*) FROM (SELECT checkpoint_id, sample_id, judge, dimension FROM kg_qa.judge_scores "
        "GROUP BY ALL HAVING count(*) > 1)"
    ) == [(0,)]
    assert wh.query_rows("SELECT count(DISTINCT checkpoint_id) FROM kg_qa.gates") == [(2,)]


@pytest.mark.slow
def test_a_checkpoint_another_run_is_evaluating_gets_that_runs_verdict_and_exit_code(tmp_path):
    """#59.5: while another run evaluated the checkpoint, `eval-pipeline run` printed "SKIPPED ... not run twice"
    and exited 0 though the stored verdict was failed gates: a CI step checking the exit code let it through.
    Now it waits for that run and reports its verdict with that verdict's exit code."""
    from eval_pipeline.devtools.openai_stub import StubServer

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    root = tmp_path / "checkpoints" / "ckpt-0100"
    root.mkdir(parents=True)
    for name in ("kg_qa.jsonl", "checkpoint.json"):
        shutil.copy(SAMPLE_CHECKPOINTS / "ckpt-0100" / name, root / name)
    eval_cli = str(ROOT / ".venv" / "bin" / "eval-pipeline") if (ROOT / ".venv").exists() else "eval-pipeline"
    with StubServer() as stub:
        stub.state.latency_s = 0.05  # slow enough that the first run is still judging when the second starts
        env = dict(
            os.environ,
            DAGSTER_HOME=str(home),
            EVAL_WAREHOUSE=f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}",
            EVAL_CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
            EVAL_REPORT_DIR=str(tmp_path / "reports"),
            EVAL_WORKLIST_DIR=str(tmp_path / "wl"),
            EVAL_JUDGE="openai",
            OPENAI_BASE_URL=stub.base_url,
            OPENAI_API_KEY="sk-test-wait",
            EVAL_JUDGE_CONCURRENCY="1",
        )
        args = [eval_cli, "run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa"]
        first = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert poll(lambda: stub.state.requests > 5, 120), "the first run never started judging"
            second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
            out_first, _ = first.communicate(timeout=600)
        finally:
            if first.poll() is None:
                first.kill()
    assert first.returncode in (3, 4), out_first[-2000:]
    assert second.returncode == first.returncode, second.stdout[-2000:] + second.stderr[-2000:]
    assert "evaluated by run" in second.stdout and "SKIPPED" not in second.stdout
