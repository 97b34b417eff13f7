"""Every statistic is a function of its rows, not of the order the warehouse returns them in: DuckDB keeps no
insertion order (preserve_insertion_order is off), and the same rows came back in another order once a table was
written differently, which moved the bootstrap intervals of the demo's agreement (the draws pick items by
position) and the last bits of its means. Each function here gets the same rows shuffled and must give the very
same frame."""

import numpy as np
import pandas as pd
import pytest

from eval_pipeline.agreement.compute import compute_agreement
from eval_pipeline.agreement.length_bias import length_bias
from eval_pipeline.judge.repeat import repeatability
from eval_pipeline.scoring.comparison import compare
from eval_pipeline.scoring.gates import evaluate_gates
from eval_pipeline.scoring.summary import summarise

N = 40


def _shuffled(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    return df.sample(frac=1, random_state=seed)  # the index goes along: a function may not lean on it either


def _same(make, *frames: pd.DataFrame) -> None:
    expected = make(*frames)
    for seed in (1, 2):
        got = make(*(_shuffled(f, seed + k) for k, f in enumerate(frames)))
        pd.testing.assert_frame_equal(got.reset_index(drop=True), expected.reset_index(drop=True), check_exact=True)


def _scores(rubric, rng: np.random.Generator, ckpt: str = "c") -> pd.DataFrame:
    """One row per sample: every judged dimension on its scale, and the headline with many distinct values (a
    mean over few values is resampled from its value counts; many values take the index draws)."""
    df = pd.DataFrame({"checkpoint_id": ckpt, "sample_id": [f"s{i:02d}" for i in range(N)]})
    for d in rubric.judged_dimensions:
        df[d.key] = rng.integers(1, 6, N).astype(float)
    df["npc_type"] = rng.choice(["guard", "merchant"], N)
    df["behavior_state"] = "idle"
    df[rubric.headline] = rng.normal(3, 1, N)
    return df


def test_summary_and_comparison_do_not_depend_on_row_order(rubrics):
    rubric = rubrics["npc_dialogue"]
    rng = np.random.default_rng(3)
    child, parent = _scores(rubric, rng), _scores(rubric, rng, "p")
    _same(lambda s: summarise(rubric, "c", s), child)
    _same(lambda c, p: compare(rubric, "c", "p", c, p, {d.key: 0.3 for d in rubric.judged_dimensions}), child, parent)


def test_gates_do_not_depend_on_row_order(rubrics):
    rubric = rubrics["kg_qa"]
    rng = np.random.default_rng(8)
    scores = _scores(rubric, rng)
    for d in rubric.judged_dimensions:  # means whose last bits depend on the order of their terms
        scores[d.key] += rng.normal(0, 0.01, N)
    scores["triple_coverage"] = rng.random(N)
    gates = evaluate_gates(rubric, "c", scores)
    assert gates.value.notna().sum() >= 3  # the means are computed, not failed closed
    _same(lambda s: evaluate_gates(rubric, "c", s), scores)


def test_length_bias_does_not_depend_on_row_order(rubrics):
    rubric = rubrics["npc_dialogue"]
    scores = _scores(rubric, np.random.default_rng(4))
    rng = np.random.default_rng(5)
    lengths = pd.Series(rng.normal(4, 0.5, N), index=scores.sample_id)
    humans = {"persona_consistency": pd.Series(rng.integers(1, 6, N).astype(float), index=scores.sample_id)}
    names = ["persona_consistency", rubric.headline]
    _same(lambda s: length_bias("c", s, lengths.sample(frac=1, random_state=9), humans, names, 4.1), scores)


def _ratings_and_judge(rubric, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    ratings, judge = [], []
    for ckpt in ("c1", "c2"):
        for i in range(N // 2):
            for d in rubric.judged_dimensions:
                truth = rng.integers(1, 6)
                for r in ("ann", "bo", "cy"):
                    if rng.random() < 0.9:  # a few items rated by two raters only
                        score = float(np.clip(truth + rng.integers(-1, 2), 1, 5))
                        ratings.append(dict(checkpoint_id=ckpt, sample_id=f"s{i:02d}", evaluator=r, dimension=d.key,
                                            score=score, rater_kind="human"))  # fmt: skip
                judge.append(dict(checkpoint_id=ckpt, sample_id=f"s{i:02d}", judge="panel", kind="dimension",
                                  dimension=d.key, score=float(np.clip(truth + rng.normal(0, 0.7), 1, 5))))  # fmt: skip
    return pd.DataFrame(ratings), pd.DataFrame(judge)


@pytest.mark.parametrize("ckpt", ["c1", "ALL"])
def test_agreement_does_not_depend_on_row_order(rubrics, ckpt):
    rubric = rubrics["npc_dialogue"]
    ratings, judge = _ratings_and_judge(rubric, np.random.default_rng(6))
    if ckpt != "ALL":
        ratings, judge = ratings[ratings.checkpoint_id == ckpt], judge[judge.checkpoint_id == ckpt]
    _same(lambda r, j: compute_agreement(rubric, ckpt, r, j), ratings, judge)
    rows = compute_agreement(rubric, ckpt, ratings, judge)
    assert (rows.raters == "judge~human_mean").any() and rows.ci_low.notna().any()  # intervals were drawn


def test_repeatability_does_not_depend_on_row_order(rubrics):
    rubric = rubrics["npc_dialogue"]
    rng = np.random.default_rng(7)
    dims = [d.key for d in rubric.judged_dimensions]
    base = pd.DataFrame(
        [dict(sample_id=f"s{i:02d}", judge="panel", dimension=d, base=rng.normal(3, 1)) for i in range(N) for d in dims]
    )
    repeats = []
    for _ in range(3):
        noisy = (base["base"] + rng.normal(0, 0.3, len(base))).round(2)
        repeats.append(base.drop(columns="base").assign(score=noisy, chosen_score=noisy.round(), expected_score=None))
    _same(lambda *r: repeatability("c", list(r), dims), *repeats)
