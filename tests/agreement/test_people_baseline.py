"""#72: the people baseline a judge is set against ("as consistent as people", "below people") is the people's own
agreement with each other, computed from people only: never the judge's rows, whatever they are called, nor model
raters'. Checked against scikit-learn on the evaluated sample lake, and on frames built to tempt the old filter."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from eval_pipeline.agreement.compute import compute_agreement
from eval_pipeline.agreement.trust import NO_PEOPLE_BASELINE, _people
from eval_pipeline.core.contracts import BETWEEN_JUDGE, BETWEEN_MIXED, BETWEEN_MODELS, BETWEEN_PEOPLE
from eval_pipeline.rubrics import load_rubrics
from tests.helpers.reference import reference_tables


@pytest.mark.slow
def test_every_people_baseline_of_the_sample_lake_is_the_two_peoples_own_kappa():
    """Every trust row that sets the judge beside people quotes the two people's quadratic kappa on the items both
    rated, pooled over the checkpoints the judge scored, as scikit-learn computes it (before, the judge's own
    written scores were averaged in: kg_qa accuracy's baseline read 0.51 where the people agree at 0.83)."""
    tables = reference_tables()
    rubrics = {r.name: r for r in load_rubrics()}
    checked = 0
    for name, rubric in rubrics.items():
        trust = tables[f"{name}.judge_trust"]
        ratings = tables[f"{name}.human_ratings"]
        people = ratings[ratings.rater_kind.fillna("human") == "human"]
        people = people.assign(score=pd.to_numeric(people.score))
        for dim, scale in rubric.rating_scales.items():
            row = trust[(trust.dimension == dim)].iloc[0]  # pooled: the same on every checkpoint it judged
            wide = people[people.dimension == dim].pivot_table(
                index=["checkpoint_id", "sample_id"], columns="evaluator", values="score", aggfunc="first"
            )
            assert list(wide.columns) == ["Evaluator1", "Evaluator2"], wide.columns
            both = wide.dropna()
            labels = [float(x) for x in scale.labels]
            a, b = both.Evaluator1.astype(float), both.Evaluator2.astype(float)
            expected = cohen_kappa_score(a, b, labels=labels, weights="quadratic")
            estimate, low, high = (float(row[c]) for c in ("human_kappa_quadratic", "human_kappa_ci_low",
                                                             "human_kappa_ci_high"))  # fmt: skip
            assert estimate == pytest.approx(expected, abs=1e-9), (name, dim, estimate, expected)
            assert low <= expected <= high
            assert f"people with each other: kappa_q {expected:.2f}" in str(row.reason)
            # what the row says of the judge follows from the two intervals it quotes
            judge_low, judge_high = float(row.kappa_cs_low), float(row.kappa_cs_high)
            said = (
                "below people"
                if judge_high < low
                else "above people"
                if judge_low > high
                else "as consistent as people"
            )
            assert row.versus_people == said, (name, dim, row.versus_people, said, row.reason)
            checked += 1
    assert checked == sum(len(r.rating_scales) for r in rubrics.values())


DIM = "persona_consistency"  # npc_dialogue's, on 1-5


def _ratings(raters: dict[str, str], items: int = 40, seed: int = 3) -> pd.DataFrame:
    """Ratings of ``items`` samples by ``raters`` (name -> rater_kind): a person's score is the truth plus
    noise; a model rater's is the truth shifted."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, items)
    rows = []
    for name, kind in raters.items():
        noise = rng.integers(-1, 2, items) if kind == "human" else 0
        score = np.clip(truth + noise + (1 if kind == "model" else 0), 1, 5)
        rows += [
            dict(checkpoint_id="c", sample_id=f"s{i}", evaluator=name, rater_kind=kind, dimension=DIM, score=float(v))
            for i, v in enumerate(score)
        ]
    return pd.DataFrame(rows)


def _judge(ratings: pd.DataFrame, who: str) -> pd.DataFrame:
    """The panel scoring every item as ``who`` rated it."""
    mine = ratings[ratings.evaluator == who]
    return mine.assign(judge="panel", kind="dimension")[
        ["checkpoint_id", "sample_id", "judge", "kind", "dimension", "score"]
    ]


def test_the_baseline_counts_people_with_people_only_whatever_the_rows_are_called():
    """Rows are tagged by who they compare where they are made (``agreement.between``), so a judge's row never
    enters the baseline under any name, nor a model rater's, nor a person set against a model rater."""
    frame = pd.DataFrame(
        [
            dict(dimension=DIM, statistic="cohen_kappa_quadratic", raters="Ann~Bo", n_items=40, value=0.8,
                 ci_low=0.7, ci_high=0.9, between=BETWEEN_PEOPLE),
            dict(dimension=DIM, statistic="cohen_kappa_quadratic", raters="judge_chosen~human_mean", n_items=40,
                 value=0.1, ci_low=0.0, ci_high=0.2, between=BETWEEN_JUDGE),
            dict(dimension=DIM, statistic="cohen_kappa_quadratic", raters="Ann~gpt-rater", n_items=40, value=0.2,
                 ci_low=0.1, ci_high=0.3, between=BETWEEN_MIXED),
            dict(dimension=DIM, statistic="cohen_kappa_quadratic", raters="m1~m2", n_items=40, value=0.3,
                 ci_low=0.2, ci_high=0.4, between=BETWEEN_MODELS),
        ]
    )  # fmt: skip
    assert _people(frame, DIM) == (0.8, 0.7, 0.9)
    assert all(math.isnan(v) for v in _people(frame.drop(columns="between"), DIM))  # stored before: no baseline


def test_compute_agreement_tags_each_row_by_who_it_compares(rubrics):
    """People with people, people with a model rater (a rubric that counts models in the human mean), and the
    judge's rows (expected and written scores): the baseline is the two people alone, as scikit-learn has it."""
    npc = rubrics["npc_dialogue"]
    rubric = npc.model_copy(
        update={"human_ratings": npc.human_ratings.model_copy(update={"models_in_human_mean": True})}
    )
    ratings = _ratings({"Ann": "human", "Bo": "human", "gpt-rater": "model"})
    rows = compute_agreement(rubric, "c", ratings, _judge(ratings, "gpt-rater"))
    assert rows["between"].notna().all()
    pairs = rows[(rows.statistic == "cohen_kappa_quadratic") & (rows.dimension == DIM)]
    by = pairs.set_index("raters")["between"].to_dict()
    assert by["Ann~Bo"] == BETWEEN_PEOPLE
    assert by["Ann~gpt-rater"] == by["Bo~gpt-rater"] == BETWEEN_MIXED
    judged = {k: v for k, v in by.items() if k.startswith("judge")}  # against the human mean, the model mean
    assert len(judged) == 2 and set(judged.values()) == {BETWEEN_JUDGE}, judged
    wide = ratings.pivot(index="sample_id", columns="evaluator", values="score")
    expected = cohen_kappa_score(wide.Ann, wide.Bo, labels=[1.0, 2.0, 3.0, 4.0, 5.0], weights="quadratic")
    assert _people(rows, DIM)[0] == pytest.approx(expected)


def test_one_person_gives_no_baseline_and_the_trust_row_says_so(rubrics):
    """With one person there is no people baseline (before, the judge's own written-score row was the whole of
    it): nothing is set beside people, and the row says why."""
    from eval_pipeline.agreement.compute import judge_pairs
    from eval_pipeline.agreement.trust import pooled_trust

    rubric = rubrics["npc_dialogue"]
    ratings = _ratings({"Ann": "human"})
    judge = _judge(ratings, "Ann")
    rows = compute_agreement(rubric, "ALL", ratings, judge)
    assert all(math.isnan(v) for v in _people(rows, DIM))
    trust = pooled_trust(rubric, "j", "judge", rows, 1, judge_pairs(rubric, ratings, judge))
    dim = next(d for d in trust.dimensions if d["dimension"] == DIM)
    assert dim["versus_people"] is None and NO_PEOPLE_BASELINE in dim["reason"], dim


def test_icc_says_on_how_many_items_it_was_computed_and_what_it_left_out(rubrics):
    """#72: ICC needs complete cases; on a real panel it used 15 of 600 items with no word. Its rows say how many
    items every rater rated and how many rated by fewer it left out, as Fleiss's row does."""
    ratings = _ratings({"Ann": "human", "Bo": "human", "Cy": "human"})
    ratings = ratings[~((ratings.evaluator == "Cy") & ratings.sample_id.isin([f"s{i}" for i in range(10)]))]
    rows = compute_agreement(rubrics["npc_dialogue"], "c", ratings, None)
    icc = rows[(rows.dimension == DIM) & rows.statistic.str.startswith("icc_")]
    assert len(icc) == 2 and (icc.n_items == 30).all()
    assert (icc.label == "the 30 items all 3 raters rated; 10 items rated by fewer left out").all(), icc.label


def test_the_same_items_give_the_same_interval_whatever_the_row_is_called(rubrics):
    """#72: a judge that scored one checkpoint had two bootstrap intervals for one Spearman (the checkpoint's row
    and the pooled row of that same checkpoint): the seed came from the row's label. It comes from the items."""
    ratings = _ratings({"Ann": "human", "Bo": "human"})
    judge = _judge(ratings, "Bo")
    rubric = rubrics["npc_dialogue"]
    own, pooled = (compute_agreement(rubric, label, ratings, judge) for label in ("c", "ALL"))
    cols = ["dimension", "statistic", "raters", "value", "ci_low", "ci_high"]
    pd.testing.assert_frame_equal(own[cols], pooled[cols])
