"""A regression is a drop that matters (#58): significant *and* past the score's practical margin."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.rubrics import load_rubric
from eval_pipeline.runtime.runner import materialize_checkpoints
from eval_pipeline.scoring.comparison import compare, practical_margins
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR, SAMPLE_CHECKPOINTS, write_checkpoint


def _scores(rng: np.random.Generator, dims: list[str], shift: float, n: int = 60) -> tuple[pd.DataFrame, pd.DataFrame]:
    parent = pd.DataFrame({"sample_id": [f"s{i}" for i in range(n)]})
    for d in dims:
        parent[d] = rng.integers(1, 6, n).astype(float)
    child = parent.copy()
    for d in dims:
        child[d] = parent[d] + shift  # every sample the same change: as significant as a change can be
    return child, parent


def test_margins_of_the_five_rubrics_come_from_their_scales_and_documents():
    kg = load_rubric(RUBRIC_DIR / "kg_qa.yaml")
    assert practical_margins(kg)["fluency"] == 0.2 and practical_margins(kg)["fluency_calibrated"] == 0.2
    aq = load_rubric(RUBRIC_DIR / "answer_quality.yaml")
    assert practical_margins(aq)["accuracy"] == 0.25  # 0-5 scale
    ed = practical_margins(load_rubric(RUBRIC_DIR / "empathetic_dialogue.yaml"))
    assert ed["safety"] == 0.1 < ed["emotion"] == 0.2  # the crisis rule's dimension is held tighter
    rp = practical_margins(load_rubric(RUBRIC_DIR / "roleplay_style.yaml"))
    assert rp["ertd"] == 5.0 and rp["jera_total"] == 13.5


def test_a_significant_drop_below_the_margin_is_a_change_not_a_regression():
    rubric = load_rubric(RUBRIC_DIR / "kg_qa.yaml")
    dims = [d.key for d in rubric.judged_dimensions]
    rng = np.random.default_rng(3)
    child, parent = _scores(rng, dims, -0.006)
    df = compare(rubric, "c", "p", child, parent).set_index("score")
    fluency = df.loc["fluency"]
    assert fluency.p_holm < 0.05 and not fluency.regression
    assert "changed, below the margin of 0.2" in fluency.note
    # the same drop past the margin regresses
    child, parent = _scores(rng, dims, -0.3)
    df = compare(rubric, "c", "p", child, parent).set_index("score")
    assert df.loc["fluency"].regression and df.loc["fluency"].note is None
    # the judge's own repeat noise widens the margin: a drop within what repeating the judge gives is no regression
    df = compare(rubric, "c", "p", child, parent, judge_noise_sd={"fluency": 3.0}).set_index("score")
    assert df.loc["fluency"].judge_noise_95 > 0.3 and not df.loc["fluency"].regression


@pytest.mark.slow
def test_a_near_copy_of_ckpt_0300_is_not_regressed(tmp_path, warehouse_path, instance):
    """ckpt-0300 with one word added to every answer, its parent ckpt-0300, on kg_qa: the heuristic judge moves
    every score a little (significant: it is deterministic), far below the margin: not REGRESSED."""
    root = tmp_path / "ckpts"
    lines = (SAMPLE_CHECKPOINTS / "ckpt-0300" / "kg_qa.jsonl").read_text(encoding="utf-8").splitlines()
    write_checkpoint(root, "ckpt-0300", {"kg_qa": lines})
    copied = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            copied.append(line)  # the sample's bad lines stay bad
            continue
        if isinstance(row, dict) and isinstance(row.get("answer"), str):
            word = next((w for w in reversed(row.get("source_chunk", "").split()) if w.isalpha() and len(w) > 3), "")
            row["answer"] += f" {word}"  # a word of its own source: grounded, and one word longer
        copied.append(json.dumps(row))
    manifest = {"model": "near-copy", "created_at": "2026-10-02T00:00:00Z", "parent": "ckpt-0300"}
    write_checkpoint(root, "ckpt-0301", {"kg_qa": copied}, manifest)
    defs = build_definitions(RUBRIC_DIR, warehouse_path, str(root))
    outcomes = materialize_checkpoints(defs, instance, ["ckpt-0300", "ckpt-0301"], {"kg_qa"})
    assert all(o.success for o in outcomes)
    wh = Warehouse(warehouse_path)
    rows = wh.query_df(
        "SELECT score, delta, p_holm, regression, note FROM kg_qa.comparison WHERE checkpoint_id = 'ckpt-0301'"
    )
    assert len(rows) and not rows.regression.any(), rows
    dropped = rows[(rows.p_holm < 0.05) & (rows.delta < 0)]  # significant drops, each said for what it is
    assert dropped.note.str.contains("below the margin|not trusted").all(), rows
    assert dropped.note.str.contains("changed, below the margin of 0.2").any(), rows
    (verdict,) = wh.query_rows(
        "SELECT verdict FROM main.verdicts WHERE checkpoint_id = 'ckpt-0301' AND rubric = 'kg_qa'"
    )
    assert verdict[0] != "REGRESSED"
