"""#32.2, end to end through the CLI: a judge's verdict comes from its pooled calibration set, the same for every
checkpoint it judged, and a new checkpoint with no ratings of its own carries it (never "0 human-rated samples").

The empathetic_dialogue rubric as shipped, with a bar its offline judge clears on the sample ratings (kappa_q and
Spearman >= 0.35 within the margin: the lowest lower bound of its confidence sequences on the 120 ratings,
helpfulness's kappa, is 0.33) and without the gates the sample data fails on purpose (missed crises, safety
mean): three rated checkpoints, then ckpt-0400 (ckpt-0200's outputs again, parent ckpt-0300, nobody rated it)."""

import json
import re
import shutil

import pytest
import yaml

from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR, SAMPLE_CHECKPOINTS

RUBRIC = "empathetic_dialogue"


def _rubric_dir(tmp_path):
    doc = yaml.safe_load((RUBRIC_DIR / f"{RUBRIC}.yaml").read_text())
    doc["gates"] = [g for g in doc["gates"] if g["name"] not in ("zero_missed_crises", "safety_mean")]
    for g in doc["gates"]:
        if g["kind"] == "judge_reliability":
            g["threshold"], g["params"]["min_spearman"] = 0.35, 0.35
    out = tmp_path / "rubrics"
    out.mkdir()
    (out / f"{RUBRIC}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def _checkpoints(tmp_path):
    root = tmp_path / "checkpoints"
    for ckpt in ("ckpt-0100", "ckpt-0200", "ckpt-0300"):
        (root / ckpt).mkdir(parents=True)
        for name in ("checkpoint.json", f"{RUBRIC}.jsonl"):
            shutil.copy(SAMPLE_CHECKPOINTS / ckpt / name, root / ckpt / name)
    new = root / "ckpt-0400"
    new.mkdir()
    shutil.copy(SAMPLE_CHECKPOINTS / "ckpt-0200" / f"{RUBRIC}.jsonl", new / f"{RUBRIC}.jsonl")
    manifest = dict(model="lumen-7b-chat", created_at="2026-10-15T08:00:00Z", parent="ckpt-0300", step=4000)
    (new / "checkpoint.json").write_text(json.dumps(manifest))
    return root


@pytest.mark.slow
def test_a_new_checkpoint_without_ratings_carries_its_judges_verdict_and_passes(tmp_path, monkeypatch, capsys):
    from eval_pipeline.cli import main as cli

    lake = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    for k, v in {
        "EVAL_RUBRIC_DIR": str(_rubric_dir(tmp_path)),
        "EVAL_CHECKPOINT_DIR": str(_checkpoints(tmp_path)),
        "DAGSTER_HOME": str(tmp_path / "home"),
        "EVAL_WAREHOUSE": lake,
        "EVAL_REPORT_DIR": str(tmp_path / "rep"),
        "EVAL_WORKLIST_DIR": str(tmp_path / "worklists"),
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("EVAL_JUDGE", raising=False)
    # the three rated checkpoints in one command: their judge's verdict is decided on all their ratings at once
    cli(["run", "--checkpoint", "ckpt-0100", "--checkpoint", "ckpt-0200", "--checkpoint", "ckpt-0300"])
    first = capsys.readouterr().out
    wh = Warehouse(lake)
    verdicts = wh.query_rows(
        f"SELECT checkpoint_id, verdict, n_rated, n_checkpoints FROM {RUBRIC}.judge_trust WHERE dimension = 'ALL' "
        "ORDER BY 1"
    )
    assert [v[1:] for v in verdicts] == [("trusted", 120, 3)] * 3, verdicts
    assert "untrusted on" not in first  # (a checkpoint's own ratings may still show drift, said as such)

    # a fourth checkpoint nobody rated: it carries the verdict, its gates pass, the command exits 0
    code = cli(["run", "--checkpoint", "ckpt-0400"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 0, text
    assert re.search(r"ckpt-0400 \(lumen-7b-chat\): PASSED", text), text
    assert "0 human-rated" not in text and "pending" not in text.lower()
    (row,) = wh.query_rows(
        f"SELECT verdict, n_rated, n_checkpoints, own_n, drift FROM {RUBRIC}.judge_trust "
        "WHERE checkpoint_id = 'ckpt-0400' AND dimension = 'ALL'"
    )
    assert row == ("trusted", 120, 3, 0, None)  # the pooled set of the three rated checkpoints; no drift check
    gate = wh.query_rows(
        f"SELECT status, reason FROM {RUBRIC}.gates WHERE checkpoint_id = 'ckpt-0400' AND gate = 'judge_reliability'"
    )
    assert gate[0][0] == "passed" and gate[0][1].startswith("trusted: heuristic judge"), gate
