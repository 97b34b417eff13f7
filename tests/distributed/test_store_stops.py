"""An object store that stops answering in the middle of a run's writes (SIGSTOP to the S3 server, as a network
partition or a hung store would look), then answers again (SIGCONT): the lake's rows on S3, its catalog local.

What a team on object storage checks: the run fails in one line that says the store did not answer (no traceback),
a reader never sees a partition half-written (DuckLake commits a step's files in one catalog transaction), and
running the same command again ends with the tables a run that never met the outage makes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from eval_pipeline.core.settings import without_settings
from eval_pipeline.devtools import services
from tests.helpers.lakes import contents_under, differences
from tests.helpers.waiting import poll

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("eval-pipeline"))
RUBRIC = "npc_dialogue"
WHERE = {"main.checkpoints": ["path"]}  # where a checkpoint lay (its project folder): not what was evaluated


def _project(folder: Path) -> Path:
    shutil.copytree(ROOT / "rubric_configs", folder / "rubric_configs")
    for ckpt in ("ckpt-0100", "ckpt-0200"):
        shutil.copytree(ROOT / "data" / "checkpoints" / ckpt, folder / "data" / "checkpoints" / ckpt)
    shutil.copytree(ROOT / "data" / "human_ratings", folder / "data" / "human_ratings")
    return folder


def _env(project: Path, **extra: str) -> dict[str, str]:
    env = without_settings(os.environ, ("EVAL_", "DAGSTER_", "AWS_"))
    env.update(DAGSTER_HOME=str(project / "dagster_home"), EVAL_PROJECT_DIR=str(project), **extra)
    return env


def _run(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [CLI, "run", "--rubric", RUBRIC, "--no-fail-on-gates", *args]
    return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=600)


def _revise_checkpoint(project: Path) -> None:
    """ckpt-0200's outputs revised (each response a sentence longer), the lines that are not JSON left as they
    are: the second run writes rows the first did not, and quarantines what the first did."""
    path = project / "data" / "checkpoints" / "ckpt-0200" / f"{RUBRIC}.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict) and isinstance(record.get("response"), str):
            record["response"] += " Then the guard nods and steps aside."
            line = json.dumps(record)
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")


def _tables(spec: str, env: dict[str, str]) -> dict[str, pd.DataFrame]:
    return contents_under(spec, env, WHERE)


def _of(df: pd.DataFrame, ckpt: str) -> pd.DataFrame:
    return df[df.checkpoint_id == ckpt].reset_index(drop=True)


@pytest.fixture
def reference(tmp_path_factory) -> dict[str, pd.DataFrame]:
    """The same commands on the default embedded profile, with no outage: both checkpoints, then ckpt-0200
    revised and evaluated again."""
    project = _project(tmp_path_factory.mktemp("reference"))
    env = _env(project)
    assert _run(project, env).returncode == 0
    _revise_checkpoint(project)
    done = _run(project, env, "--checkpoint", "ckpt-0200")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return _tables(f"ducklake:sqlite:{project}/data/lake/catalog.sqlite", env)


def test_a_store_that_stops_mid_write_fails_the_run_in_one_line_and_a_rerun_converges(tmp_path, reference):
    project = _project(tmp_path / "project")
    with services.s3() as store:
        assert store.proc is not None and store.log is not None
        env = _env(
            project,
            **store.env(),
            EVAL_WAREHOUSE_DATA=store.url("lake") + "/",
            EVAL_S3_TIMEOUT="2",
            EVAL_S3_RETRIES="1",
        )
        spec = f"ducklake:sqlite:{project}/data/lake/catalog.sqlite"
        first = _run(project, env)
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
        before = _tables(spec, env)

        _revise_checkpoint(project)
        seen = store.log.stat().st_size
        cmd = [CLI, "run", "--rubric", RUBRIC, "--no-fail-on-gates", "--checkpoint", "ckpt-0200"]
        proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def wrote() -> bool:  # the run's first row file sent to the store
            with store.log.open("rb") as log:
                log.seek(seen)
                sent = log.read()
            return proc.poll() is not None or b'"PUT /evals/lake/' in sent or b'"POST /evals/lake/' in sent

        poll(wrote, 300, every=0.05)
        assert proc.poll() is None, "the run ended before it wrote to the store"
        os.kill(store.proc.pid, signal.SIGSTOP)
        try:
            out, err = proc.communicate(timeout=300)  # the store stays silent until the run has ended
        finally:
            os.kill(store.proc.pid, signal.SIGCONT)

        said = out + err
        assert proc.returncode == 1, said[-3000:]
        assert "Traceback" not in said, said[-3000:]
        stopped = [line for line in said.splitlines() if f"the object store {store.endpoint} did not answer" in line]
        assert stopped, said[-3000:]
        assert "within 2 s, 1 retry" in stopped[0] and "run again when the store answers" in stopped[0], stopped[0]

        # a reader sees each table whole: ckpt-0200's rows are the first run's or the outage-free run's, never a mix
        during = _tables(spec, env)
        assert set(during) == set(before)
        for table, df in during.items():
            if "checkpoint_id" not in df.columns:
                continue  # a view or a table across checkpoints: each step commits on its own, a run may stop between
            mine = _of(df, "ckpt-0200")
            whole = [_of(before[table], "ckpt-0200"), _of(reference.get(table, before[table]), "ckpt-0200")]
            assert any(mine.equals(w) for w in whole), f"{table}: ckpt-0200's rows are half written"
            assert _of(df, "ckpt-0100").equals(_of(before[table], "ckpt-0100")), table

        again = _run(project, env, "--checkpoint", "ckpt-0200")
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
        assert differences(reference, _tables(spec, env)) == []
