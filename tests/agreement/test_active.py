"""The active remainder queue (#58): items the judge is unsure of come first, every item keeps a floor on its
chance, and the weights keep the estimate unbiased (coverage and ratings saved: bench_trust_decisions)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from eval_pipeline.agreement import active
from eval_pipeline.agreement.ppi import calibrated_means
from eval_pipeline.publish.annotate.queues import Plan, inclusion


def test_priorities_keep_a_floor_and_fall_back_to_equal():
    w = active.priorities(np.array([0.0, 1.0, 3.0, np.nan]), floor=0.2)
    assert w.min() >= 0.2 and w[2] > w[1] > w[0] and w.mean() == pytest.approx(1.0)
    assert (active.priorities(np.array([np.nan, 0.0])) == 1).all()  # nothing known: a plain shuffle


def test_the_judges_uncertainty_comes_from_its_score_distribution_or_its_panel():
    dist = json.dumps({"1": 0.5, "5": 0.5})  # sd 2
    rows = pd.DataFrame(
        [
            dict(sample_id="a", judge="panel", kind="dimension", dimension="d", score=3.0, score_distribution=dist),
            dict(sample_id="b", judge="panel", kind="dimension", dimension="d", score=4.0, score_distribution=None),
            dict(sample_id="b", judge="j1", kind="dimension", dimension="d", score=3.0, score_distribution=None),
            dict(sample_id="b", judge="j2", kind="dimension", dimension="d", score=5.0, score_distribution=None),
        ]
    )
    assert active.judge_uncertainty(rows) == {"a": 2.0, "b": 1.0}


def test_an_order_sample_knows_each_rated_items_chance_and_is_unbiased():
    rng = np.random.default_rng(11)
    n_items, trials = 300, 2000
    s = np.where(rng.random(n_items) < 0.3, 1.5, 0.2)
    f = rng.normal(3, 0.7, n_items)
    y = f + s * rng.standard_normal(n_items)
    ids = [f"s{i}" for i in range(n_items)]
    w = active.priorities(s)
    means, covered = [], 0
    for t in range(trials):
        queue, keys = active.order(ids, w, t)
        at = np.array([int(q[1:]) for q in queue])[:40]
        pi = active.inclusion(keys[:40], w[at], float(keys[40]))
        est = active.ipw_mean(f, f[at], y[at], pi)
        means.append(est.mean)
        covered += est.ci_low <= y.mean() <= est.ci_high
    assert abs(np.mean(means) - y.mean()) < 3 * np.std(means) / math.sqrt(trials)  # unbiased
    assert covered / trials >= 0.93


def test_the_plan_orders_the_remainder_by_uncertainty_and_says_why(rubrics):
    rubric = rubrics["answer_quality"]
    field = rubric.inputs.id_field
    samples = pd.DataFrame({field: [f"q{i:03d}" for i in range(200)]})
    for f in rubric.inputs.fields:
        if f.allowed and f.name != field:
            samples[f.name] = f.allowed[0]
    unsure = {f"q{i:03d}": (2.0 if i % 4 == 0 else 0.1) for i in range(200)}
    plan = Plan(rubric, samples, unsure)
    first = plan.remainder[:30]
    assert sum(unsure[s] == 2.0 for s in first) > 30 * 0.5  # a quarter of the items, most of the first ones
    assert sum("unsure" in plan.why[s] for s in first) > 15 and any("random" in plan.why[s] for s in plan.remainder)
    rated = set(plan.pilot) | set(plan.remainder[:25])
    pi = inclusion(plan, rated)
    assert pi is not None and set(pi) == rated and all(0 < p <= 1 for p in pi.values())
    assert all(pi[s] == 1.0 for s in plan.pilot)
    # ratings not drawn by the queue (a random sample dropped as a CSV): no weights, the uniform estimate
    assert inclusion(plan, set(plan.remainder[::8])) is None
    # without uncertainty: the seeded shuffle, no weights
    assert inclusion(Plan(rubric, samples), rated) is None


def test_calibrated_means_are_weighted_only_under_the_active_design():
    judge = pd.DataFrame({"sample_id": [f"s{i}" for i in range(50)], "dimension": "d", "score": 3.0})
    judge.loc[:9, "score"] = 5.0
    human = pd.DataFrame({"sample_id": [f"s{i}" for i in range(10)], "dimension": "d", "score": 4.0})
    plain = calibrated_means("c", judge, human).iloc[0]
    weighted = calibrated_means("c", judge, human, {f"s{i}": 0.5 for i in range(10)}).iloc[0]
    # residual -1 on 10 items drawn with probability 0.5: -1 * 10 / 0.5 / 50 = -0.4 from the judge's mean 3.4
    assert weighted.calibrated_mean == pytest.approx(3.4 - 0.4) and "inclusion probability" in weighted.reason
    assert plain.calibrated_mean != weighted.calibrated_mean and plain.reason is None


def test_a_trust_decision_on_actively_drawn_ratings_is_weighted_back_to_every_sample():
    """The queue favours items the judge is unsure of, where it agrees least with people: unweighted, kappa on
    those ratings understates the judge's agreement over all samples; weighted by 1 / pi it does not."""
    from eval_pipeline.agreement import sequential as sq

    rng = np.random.default_rng(21)
    n_items, n, trials = 2000, 300, 40
    unsure = rng.random(n_items) < 0.3
    truth = rng.standard_normal(n_items)
    cuts = np.array([-1.3, -0.5, 0.3, 1.1])
    people = np.searchsorted(cuts, truth + 0.3 * rng.standard_normal(n_items)).astype(float)
    judge = np.searchsorted(cuts, truth + np.where(unsure, 1.2, 0.2) * rng.standard_normal(n_items)).astype(float)
    population = float(sq.kappa_and_sigma(judge, people)[0])
    ids = [f"s{i}" for i in range(n_items)]
    w = active.priorities(np.where(unsure, 1.2, 0.2))
    plain, weighted = [], []
    for t in range(trials):
        queue, keys = active.order(ids, w, t)
        at = np.array([int(q[1:]) for q in queue])[:n]
        pi = active.inclusion(keys[:n], w[at], float(keys[n]))
        plain.append(sq.kappa_sequence(judge[at], people[at], sq.Rule()).estimate)
        weighted.append(sq.kappa_sequence(judge[at], people[at], sq.Rule(), 1 / pi).estimate)
    assert np.mean(plain) < population - 0.05  # biased low
    assert abs(np.mean(weighted) - population) < 0.02
