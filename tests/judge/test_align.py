"""#62: aligning a judge to people's ratings, decided on ratings it never saw.

The model judge is the local OpenAI-protocol server over real HTTP, answering as a judge of the test's making:
under one instruction variant it gives (nearly) the people's score, under the others a score that has nothing to
do with it. The offline judge is aligned end to end through the CLI and Dagster, on ratings constructed from one
of its features, and the adopted judge's trust is checked to be decided on the held-out ratings only.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.config.alignment import overlay
from eval_pipeline.devtools.openai_stub import StubServer
from eval_pipeline.judge.align import HELD_OUT, SHOWN, TUNE, Item, align
from eval_pipeline.storage.warehouse import Warehouse
from tests.helpers.judges import openai_judge
from tests.judge.test_judge import emp_records

DIM = "emotion"
GOOD = "ALIGN-VARIANT-GOOD"


def _rubric(rubrics: dict[str, RubricConfig], variants: list[str]) -> RubricConfig:
    raw = rubrics["empathetic_dialogue"].model_dump(mode="json")
    raw["align"] = {"instructions": variants, "few_shot": [0], "holdout_share": 0.3, "folds": 4, "patience": 20}
    return RubricConfig.model_validate(raw)


def _truth(n: int, seed: int = 3) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    return {f"s{i}": int(v) for i, v in enumerate(rng.integers(1, 6, size=n))}


def _items(truth: dict[str, int]) -> list[Item]:
    return [
        Item("ckpt-a", rec["sample_id"], {DIM: float(truth[rec["sample_id"]])}, "", rec)
        for rec in emp_records(len(truth))
    ]


def _scorer(truth: dict[str, int], good_marker: str | None):
    """The judge of the test: the people's score (one step off for 1 in 8 samples) when the system message holds
    ``good_marker``; else a score fixed by the sample and the prompt, unrelated to the people's."""

    def score(body: dict, scales: dict[str, tuple[int, int]]) -> dict[str, int] | None:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        sid = re.search(r"project (\d+)", user)
        if sid is None:
            return None
        key = f"s{sid.group(1)}"
        out = {}
        for k, (lo, hi) in scales.items():
            h = hashlib.sha256(f"{k}|{key}|{system}".encode()).digest()
            out[k] = lo + h[0] % (hi - lo + 1)
        if good_marker and good_marker in system:
            true = truth[key]
            out[DIM] = true if h[1] % 8 else min(5, true + 1) if true < 5 else 4
        return out

    return score


@pytest.fixture
def model_judge(tmp_path, monkeypatch):
    def start(truth, marker):
        server = StubServer()
        server.state.scorer = _scorer(truth, marker)
        server.start()
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-align")
        servers.append(server)
        return server, Warehouse(str(tmp_path / "w.duckdb"))

    servers: list[StubServer] = []
    yield start
    for s in servers:
        s.stop()


@pytest.mark.slow
def test_align_chooses_the_variant_that_agrees_and_proves_it_on_held_out_ratings(rubrics, model_judge):
    truth = _truth(80)
    rubric = _rubric(rubrics, ["Score carefully and conservatively.", f"{GOOD}: read the user's words first."])
    server, wh = model_judge(truth, GOOD)
    items = _items(truth)
    a = align(rubric, openai_judge(), wh, items, [DIM])
    assert [t.label for t in a.tried][0] == "the current judge"
    assert len(a.tried) == 3 and a.best.label.startswith("instructions #2")
    assert a.best.kappa > 0.8 > a.tried[0].kappa
    held = {i.key for i, role, _ in a.items if role == HELD_OUT}
    tuned = {i.key for i, role, _ in a.items if role in (TUNE, SHOWN)}
    assert len(held) == 24 and len(tuned) == 56 and not held & tuned
    # the held-out comparison is paired on the same items, and its interval is above 0
    assert a.heldout_kappa > 0.8 and a.heldout_old_kappa < 0.4
    assert a.gain_low > 0 and a.recommended, a.verdict
    assert a.overlay["judge_instructions"].startswith(GOOD)
    assert sorted(a.overlay["aligned"]["tuned_on"]) == sorted(tuned)
    assert sorted(a.overlay["aligned"]["held_out"]) == sorted(held)
    # every prompt went through the cache: the same alignment again asks nothing and gives the same result
    asked = server.state.completions
    again = align(rubric, openai_judge(), wh, items, [DIM])
    assert server.state.completions == asked and again.id == a.id and again.gain == a.gain


@pytest.mark.slow
def test_align_recommends_nothing_when_no_variant_is_better_than_chance(rubrics, model_judge):
    truth = _truth(80, seed=9)
    variants = [f"Variant {k}: weigh the response's tone." for k in range(6)]
    rubric = _rubric(rubrics, variants)
    _, wh = model_judge(truth, None)  # every instruction: scores unrelated to the people's
    a = align(rubric, openai_judge(), wh, _items(truth), [DIM])
    assert len(a.tried) == 7
    assert not a.recommended and not a.overlay
    assert a.gain_low <= 0 <= a.gain_high  # the best cross-validated candidate's held-out gain is noise
    assert "not recommended" in a.verdict or "nothing to adopt" in a.verdict


@pytest.mark.slow
def test_align_shows_few_shot_examples_from_the_other_folds_only(rubrics, model_judge):
    truth = _truth(60, seed=4)
    raw = rubrics["empathetic_dialogue"].model_dump(mode="json")
    raw["align"] = {"few_shot": [0, 2], "holdout_share": 0.3, "folds": 3}
    rubric = RubricConfig.model_validate(raw)
    server, wh = model_judge(truth, None)
    a = align(rubric, openai_judge(), wh, _items(truth), [DIM])
    folds = {i.key: f for i, role, f in a.items if role != HELD_OUT}
    held = {i.key for i, role, _ in a.items if role == HELD_OUT}
    shown_in_prompts = 0
    for body in server.state.bodies:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        assert "ckpt-a/s" not in system  # people's samples never in the system message
        shots = re.findall(r'"id": "(ckpt-a/s\d+)"', user.split("END_RATED_EXAMPLES")[0])
        if not shots:
            continue
        shown_in_prompts += 1
        judged = "ckpt-a/s" + re.search(r"project (\d+)", user.split("END_RATED_EXAMPLES\n")[-1]).group(1)
        assert not set(shots) & held  # a held-out sample is never shown
        if judged in folds:  # cross-validation: the examples come from the other folds
            assert all(folds[s] != folds[judged] for s in shots), (judged, shots)
    assert shown_in_prompts > 0


def _features(wh: Warehouse, rubric: RubricConfig, ckpt: str) -> pd.DataFrame:
    from eval_pipeline.ingest.samples import load_samples, to_records
    from eval_pipeline.judge.heuristic import estimate, to_scale

    terms = {t.feature: t for d in rubric.dimensions if d.key == "completeness" for t in d.heuristic}
    rows = []
    for rec in to_records(rubric, load_samples(wh, rubric, ckpt)):
        f, _ = estimate([terms["triple_coverage"]], rec)
        rows.append({"sample_id": rec["sample_id"], "completeness": to_scale(f or 0.0, 1, 5)})
    return pd.DataFrame(rows)


@pytest.mark.slow
def test_an_offline_judge_aligned_adopted_and_trusted_on_held_out_ratings_only(tmp_path, monkeypatch, capsys):
    """End to end: evaluate, rate (people who score completeness by the answer's coverage of the triples alone),
    align through Dagster, adopt, evaluate again: the new judge identity's trust is decided on exactly the held-out
    ratings."""
    from eval_pipeline.cli import main as cli
    from tests.conftest import ROOT, SAMPLE_CHECKPOINTS

    rubric_dir = tmp_path / "rubrics"
    rubric_dir.mkdir()
    shutil.copy(ROOT / "rubric_configs" / "kg_qa.yaml", rubric_dir / "kg_qa.yaml")
    ratings_dir = tmp_path / "ratings"
    (ratings_dir / "kg_qa").mkdir(parents=True)
    lake = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    env = {"EVAL_CHECKPOINT_DIR": str(SAMPLE_CHECKPOINTS), "DAGSTER_HOME": str(tmp_path / "home"),
           "EVAL_WAREHOUSE": lake, "EVAL_RUBRIC_DIR": str(rubric_dir), "EVAL_RATINGS_DIR": str(ratings_dir),
           "EVAL_JUDGE": "heuristic"}  # fmt: skip
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    run = ["run", "--rubric", "kg_qa", "--checkpoint", "ckpt-0100", "--no-fail-on-gates"]
    assert cli(run) in (0, 4)
    from eval_pipeline.rubrics import load_rubric

    rubric = load_rubric(rubric_dir / "kg_qa.yaml")
    wh = Warehouse(lake)
    people = _features(wh, rubric, "ckpt-0100")
    people = people.assign(evaluator="ann", checkpoint="ckpt-0100", notes="")
    people.to_csv(ratings_dir / "kg_qa" / "ckpt-0100.csv", index=False)
    assert cli(run) in (0, 4)
    capsys.readouterr()
    assert cli(["align", "--rubric", "kg_qa", "--dimension", "completeness"]) == 0
    out = capsys.readouterr().out
    aid = re.search(r"alignment (\w+) of kg_qa", out).group(1)
    assert "recommended:" in out and f"--adopt {aid}" in out, out
    assert "kappa_q: quadratic-weighted agreement" in out and "trust is decided afresh" in out  # #73: what, next
    table = wh.read("kg_qa", "judge_alignment", where={"alignment_id": aid})
    chosen = table[table.chosen].iloc[0]
    assert chosen.candidate > 0 and chosen.gain_low > 0 and "field_overlap" in chosen.label
    roles = wh.read("kg_qa", "judge_alignment_items", where={"alignment_id": aid})
    held = set(roles.sample_id[roles.role == HELD_OUT])
    assert len(held) == round(0.3 * len(roles)) and len(roles) == len(people)

    # the viewer shows the same alignment: its candidates, the held-out gain, the command to adopt it
    from starlette.testclient import TestClient

    from eval_pipeline.publish.viewer.app import create_app

    client = TestClient(create_app(Warehouse(lake), rubric_dir))
    listed = client.get("/align/kg_qa")
    assert listed.status_code == 200 and aid in listed.text and "recommended" in listed.text
    page = client.get(f"/align/kg_qa/{aid}")
    assert page.status_code == 200 and page.text.count('class="candidate-row') == len(table)
    assert f"{chosen.gain:+.3f}" in page.text and f"--adopt {aid}" in page.text
    assert client.get("/align/kg_qa/ffffffffff").status_code == 404
    assert client.get("/align/no%20such/x").status_code == 404

    assert cli(["align", "--rubric", "kg_qa", "--adopt", aid]) == 0
    over = yaml.safe_load((rubric_dir / "aligned" / "kg_qa.yaml").read_text())
    assert over["aligned"]["id"] == aid and set(over["heuristic_weights"]) == {"completeness"}
    assert sorted(over["aligned"]["held_out"]) == sorted(f"ckpt-0100/{s}" for s in held)
    assert "adopted: the judge now" in client.get("/align/kg_qa").text  # #73: the viewer marks it too
    capsys.readouterr()
    assert cli(["align", "--rubric", "kg_qa", "--list"]) == 0  # #73: the adopted one is marked, columns apart
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].split()[:3] == ["alignment", "made", "dimensions"], listed
    assert any(line.startswith(aid) and "ADOPTED" in line for line in listed), listed
    old_identity = wh.read("kg_qa", "judge_identity").judge_identity.iloc[0]

    assert cli(run) in (0, 4)
    identity = wh.read("kg_qa", "judge_identity").judge_identity.iloc[0]
    assert identity != old_identity  # a new judge
    pool = wh.read("kg_qa", "calibration_pool")
    assert set(pool.sample_id[pool.tuned_on.isna()]) == held  # the calibration set: the held-out ratings only
    assert (pool.tuned_on.dropna() == aid).all()
    trust = wh.read("kg_qa", "judge_trust")
    row = trust[(trust.dimension == "completeness") & (trust.judge_identity == identity)].iloc[0]
    assert row.n_rated == len(held)
    # #73: the checkpoint right after adopting says why its judge's count started again, and what the figure is
    from eval_pipeline.scoring.verdict import read as read_verdicts

    v = read_verdicts(wh, "kg_qa", ["ckpt-0100"])[0]
    assert (v.aligned, v.aligned_tuned_on) == (aid, len(over["aligned"]["tuned_on"]))
    assert "completeness" in v.trust_pending and v.ratings_needed, (v.trust, v.reasons)
    said = " ".join(text for _, text in v.reasons)
    assert f"alignment {aid}, adopted: a new judge" in said and f"({len(held)} so far; a projection" in said, said
    assert "`eval-pipeline annotate`" in said
    # the adopted judge says where it came from, and deleting its file returns to the old judge
    assert json.dumps(over["aligned"]["config"]) and "weight" in over["aligned"]["config"]
    (rubric_dir / "aligned" / "kg_qa.yaml").unlink()
    assert load_rubric(rubric_dir / "kg_qa.yaml").judge_version == over["aligned"]["from_prompt_version"]


@pytest.mark.slow
def test_an_alignment_that_recommends_nothing_cannot_be_adopted_and_too_few_ratings_is_said(
    tmp_path, monkeypatch, capsys
):
    from eval_pipeline.cli import main as cli
    from tests.conftest import SAMPLE_CHECKPOINTS

    lake = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    for k, v in {"EVAL_CHECKPOINT_DIR": str(SAMPLE_CHECKPOINTS), "DAGSTER_HOME": str(tmp_path / "home"),
                 "EVAL_WAREHOUSE": lake, "EVAL_RATINGS_DIR": str(tmp_path / "none")}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    assert cli(["run", "--rubric", "kg_qa", "--checkpoint", "ckpt-0100", "--no-fail-on-gates"]) in (0, 4)
    capsys.readouterr()
    assert cli(["align", "--rubric", "kg_qa"]) == 4
    assert "not enough ratings to align" in capsys.readouterr().out
    assert cli(["align", "--rubric", "kg_qa", "--dimension", "nope"]) == 2
    assert cli(["align", "--rubric", "kg_qa", "--adopt", "0123456789"]) == 2
    assert not Path(tmp_path / "aligned").exists()


@pytest.mark.slow
def test_align_searches_score_anchor_wordings_too(rubrics, model_judge):
    truth = _truth(80, seed=11)
    raw = rubrics["empathetic_dialogue"].model_dump(mode="json")
    raw["align"] = {"anchors": [{DIM: {5: f"{GOOD}: names the feeling and why, in the user's own words"}}],
                    "few_shot": [0]}  # fmt: skip
    rubric = RubricConfig.model_validate(raw)
    _, wh = model_judge(truth, GOOD)
    a = align(rubric, openai_judge(), wh, _items(truth), [DIM])
    assert a.best.label.startswith("anchor wording #1") and a.recommended, a.verdict
    assert a.overlay["anchors"] == {DIM: {5: f"{GOOD}: names the feeling and why, in the user's own words"}}
    adopted = RubricConfig.model_validate(overlay(raw, a.overlay))
    assert GOOD in next(d for d in adopted.dimensions if d.key == DIM).levels[5]


def test_an_alignment_with_nothing_to_adopt_says_what_to_do_next():
    """#73: `align` ending with nothing recommended said nothing of what the figure is or what to do next."""
    from types import SimpleNamespace

    from eval_pipeline.publish.alignment import report_lines

    chosen = {"dimensions": "completeness", "from_label": "heuristic", "n_tune": 40, "n_heldout": 20,
              "total_calls": 0, "total_cost": None, "stopped": "all tried", "candidate": 0,
              "verdict": "nothing to adopt: no candidate beat the current judge in cross-validation"}  # fmt: skip
    row = {"chosen": True, "candidate": 0, "cv_kappa": 0.41, "cv_kappa_low": 0.2, "cv_kappa_high": 0.6,
           "cv_spearman": 0.5, "label": "current judge"}  # fmt: skip
    view = SimpleNamespace(id="abc", rubric="kg_qa", chosen=chosen, candidates=[row], roles={}, recommended=False)
    text = "\n".join(report_lines(view))
    assert "kappa_q: quadratic-weighted agreement" in text
    assert "make annotate" in text and "eval-pipeline align --rubric kg_qa" in text and "--adopt" not in text
