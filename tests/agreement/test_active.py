"""The active remainder queue (#58): items the judge is unsure of come first, every item keeps a floor on its
chance, and the weights keep the estimate unbiased (coverage and ratings saved: bench_trust_decisions)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from eval_pipeline.agreement import active, design, ppi
from eval_pipeline.agreement.plan import Plan, inclusion
from eval_pipeline.agreement.ppi import calibrated_means


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


@pytest.mark.slow
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
        queue, keys = design.order(ids, w, t)
        at = np.array([int(q[1:]) for q in queue])[:40]
        pi = design.inclusion(keys[:40], w[at], float(keys[40]))
        est = ppi.ipw_mean(f, f[at], y[at], pi)
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
        queue, keys = design.order(ids, w, t)
        at = np.array([int(q[1:]) for q in queue])[:n]
        pi = design.inclusion(keys[:n], w[at], float(keys[n]))
        plain.append(sq.kappa_sequence(judge[at], people[at], sq.Rule()).estimate)
        weighted.append(sq.kappa_sequence(judge[at], people[at], sq.Rule(), 1 / pi).estimate)
    assert np.mean(plain) < population - 0.05  # biased low
    assert abs(np.mean(weighted) - population) < 0.02


def _varying(rng: np.random.Generator, n_items: int) -> tuple[np.ndarray, ...]:
    """Label positions 0-4: the judge's expected position f and written score round(f); people's round(f + s e)
    with s 1.5 on a quarter of the items (the judge unsure) and 0.3 elsewhere; the judge's distribution normal
    around f with that s (its mean, second moment, variance and level probabilities)."""
    from scipy import stats as sps

    f = np.clip(rng.normal(2.2, 0.9, n_items), 0, 4)
    s = np.where(rng.random(n_items) < 0.25, 1.5, 0.3)
    judge = np.clip(np.floor(f + 0.5), 0, 4)
    people = np.clip(np.floor(f + s * rng.standard_normal(n_items) + 0.5), 0, 4)
    edges = np.concatenate([[-np.inf], np.arange(4) + 0.5, [np.inf]])
    prob = np.diff(sps.norm.cdf((edges - f[:, None]) / s[:, None]), axis=-1)
    mean, second = prob @ np.arange(5.0), prob @ np.arange(5.0) ** 2
    return judge, people, mean, second, second - mean**2, prob


def test_the_frame_estimators_are_the_plain_statistics_when_every_item_is_rated():
    from scipy import stats as sps

    from eval_pipeline.agreement import sequential as sq

    judge, people, mean, second, _, prob = _varying(np.random.default_rng(3), 500)
    every, certain = np.arange(500), np.ones(500)
    k = sq.frame_sequence(sq.ppi_kappa_bounds, judge, mean, second, every, people, certain, sq.Rule())
    rho = sq.frame_sequence(sq.ppi_spearman_bounds, judge, prob, np.arange(5.0), every, people, certain, sq.Rule())
    assert k.estimate == pytest.approx(float(sq.kappa_and_sigma(judge, people)[0]), abs=1e-12)
    assert rho.estimate == pytest.approx(float(sps.spearmanr(judge, people).statistic), abs=1e-12)


def test_the_frame_estimators_cover_under_the_active_queue_and_are_narrower_than_weighting_alone():
    """Ratings drawn by the queue's decision priorities: the anytime-valid bounds over the frame cover the frame's
    kappa and Spearman at a fixed size (they are wider than a fixed-n interval, so nearly always), and are tighter
    than the weighted statistics of the rated items alone on the same ratings."""
    from scipy import stats as sps

    from eval_pipeline.agreement import sequential as sq

    rng = np.random.default_rng(5)
    n_items, n, trials = 1500, 120, 60
    judge, people, mean, second, var, prob = _varying(rng, n_items)
    kappa, rho = float(sq.kappa_and_sigma(judge, people)[0]), float(sps.spearmanr(judge, people).statistic)
    shares = active.kappa_variance_shares(judge, mean, var, 0.6)
    assert shares is not None
    w = active.priorities(np.sqrt(shares))
    ids = [f"s{i}" for i in range(n_items)]
    rule = sq.Rule()
    covered, narrower = 0, 0
    for t in range(trials):
        queue, keys = design.order(ids, w, 100 + t)
        at = np.array([int(q[1:]) for q in queue])[:n]
        pi = design.inclusion(keys[:n], w[at], float(keys[n]))
        k = sq.frame_sequence(sq.ppi_kappa_bounds, judge, mean, second, at, people[at], pi, rule)
        r = sq.frame_sequence(sq.ppi_spearman_bounds, judge, prob, np.arange(5.0), at, people[at], pi, rule)
        covered += (k.low <= kappa <= k.high) and (r.low <= rho <= r.high)
        alone = sq.kappa_sequence(judge[at], people[at], rule, 1 / pi)
        narrower += (k.high - k.low) < (alone.high - alone.low)
    assert covered >= 0.95 * trials
    assert narrower >= 0.9 * trials


def test_the_plan_asks_first_where_a_rating_narrows_kappa_most():
    """Two items the judge is equally unsure of: the one far from the middle of the scale weighs more on kappa and
    gets the larger share; an item it is sure of gets little; without any spread there is no priority at all."""
    rows = []
    dists = {
        "edge": {"1": 0.5, "2": 0.5},  # unsure, at the bottom of the scale
        "middle": {"3": 0.5, "4": 0.5},  # as unsure, in the middle
        "sure": {"5": 1.0},
    }
    for k in range(40):
        for name, d in dists.items():
            score = float(sum(float(v) * p for v, p in d.items()))
            rows.append(
                dict(
                    sample_id=f"{name}{k}",
                    judge="panel",
                    kind="dimension",
                    dimension="d",
                    score=score,
                    score_distribution=json.dumps(d),
                )
            )
    u = active.decision_uncertainty(pd.DataFrame(rows), bar=0.6)
    assert u["edge0"] > u["middle0"] > u["sure0"] == 0.0
    plain = pd.DataFrame(rows).assign(score_distribution=None)
    assert active.decision_uncertainty(plain, bar=0.6) == {}


def test_a_trust_row_on_actively_drawn_ratings_is_decided_over_every_judged_sample(rubrics):
    """The pooled checkpoint's ratings were drawn by the active queue: the trust row's sequences are the frame
    estimators over all of the judge's samples (the reason says so), on the rated samples the design covers, and
    kappa's is narrower than weighting the rated items alone."""
    from eval_pipeline.agreement.compute import compute_agreement, judge_pairs, predictions_on_human_scale
    from eval_pipeline.agreement.trust import trust_rows

    rubric = rubrics["empathetic_dialogue"]
    dim = rubric.judged_dimensions[0].key
    labels = [float(x) for x in rubric.rating_scales[dim].labels]
    assert np.allclose(np.diff(labels), labels[1] - labels[0])
    rng = np.random.default_rng(8)
    n_items, n = 800, 150
    judge, people, mean, second, var, prob = _varying(rng, n_items)
    ids = [f"s{i:04d}" for i in range(n_items)]
    to_scale = labels[0] + (labels[1] - labels[0]) * np.arange(5.0)
    judged = pd.DataFrame(
        dict(
            checkpoint_id="c",
            sample_id=ids,
            judge="panel",
            judge_kind="llm",
            kind="dimension",
            dimension=dim,
            score=to_scale[judge.astype(int)],
            status="ok",
            reason=None,
            score_distribution=[json.dumps({f"{v:g}": round(p, 6) for v, p in zip(to_scale, row)}) for row in prob],
        )
    )
    shares = active.kappa_variance_shares(judge, mean, var, 0.6)
    assert shares is not None
    w = active.priorities(np.sqrt(shares))
    queue, keys = design.order(ids, w, 4)
    rated = queue[:n]
    at = np.array([ids.index(s) for s in rated])
    pi = design.inclusion(keys[:n], w[at], float(keys[n]))
    ratings = pd.DataFrame(
        dict(checkpoint_id="c", sample_id=rated, evaluator="A", dimension=dim, score=to_scale[people[at].astype(int)])
    )
    rated_judge = judged[judged.sample_id.isin(rated)]
    pooled = compute_agreement(rubric, "c", ratings, rated_judge)
    pairs = judge_pairs(rubric, ratings, rated_judge)
    weights = pd.Series(1 / pi, index=pd.MultiIndex.from_arrays([["c"] * n, rated]))
    frames = predictions_on_human_scale(rubric, judged)
    over = trust_rows(rubric, "c", "id1", "judge X", pooled, pooled, 1, pairs, weights, frames)
    alone = trust_rows(rubric, "c", "id1", "judge X", pooled, pooled, 1, pairs, weights)
    row, plain = over[over.dimension == dim].iloc[0], alone[alone.dimension == dim].iloc[0]
    assert f"over all {n_items} judged samples" in row.reason and "over all" not in plain.reason
    assert row.kappa_cs_high - row.kappa_cs_low < plain.kappa_cs_high - plain.kappa_cs_low
    population = float(sq_kappa(judge, people))
    assert row.kappa_cs_low <= population <= row.kappa_cs_high


def test_a_stored_pooled_trust_gives_back_the_same_trust_rows(rubrics):
    """A judge's pooled trust is stored once (main.pooled_trust) and read back by the next landing with the pool
    unchanged: the rows it gives are the rows computing it again gives, value for value (NaN, ints, None kept)."""
    from eval_pipeline.agreement.compute import compute_agreement, judge_pairs
    from eval_pipeline.agreement.trust import PooledTrust, checkpoint_trust, pooled_trust
    from tests.helpers.judges import judge_long

    rubric = rubrics["kg_qa"]
    dims = list(rubric.rating_scales)
    rng = np.random.default_rng(3)
    ids = [f"s{i:03d}" for i in range(40)]
    labels = {d: [float(x) for x in rubric.rating_scales[d].labels] for d in dims}
    ratings = pd.DataFrame(
        [
            dict(checkpoint_id="c", sample_id=s, evaluator=e, dimension=d, score=float(rng.choice(labels[d])))
            for s in ids
            for d in dims[:1]
            for e in ("A", "B")
        ]
    )
    judged = judge_long({s: {d: float(rng.choice(labels[d])) for d in dims} for s in ids})
    pooled = compute_agreement(rubric, "c", ratings, judged)
    made = pooled_trust(rubric, "id1", "judge X", pooled, 1, judge_pairs(rubric, ratings, judged))
    assert any(v != v for row in made.dimensions for v in row.values() if isinstance(v, float))  # NaN in it
    again = PooledTrust.from_json(made.to_json())
    pd.testing.assert_frame_equal(
        checkpoint_trust(rubric, again, "c", pooled), checkpoint_trust(rubric, made, "c", pooled)
    )


def sq_kappa(a: np.ndarray, b: np.ndarray) -> float:
    from eval_pipeline.agreement import sequential as sq

    return float(sq.kappa_and_sigma(a, b)[0])


def _frames(rng: np.random.Generator, frames: int, n_items: int) -> tuple[np.ndarray, ...]:
    """``_varying`` data, ``frames`` frames at once (frames along the first axis)."""
    from scipy import stats as sps

    f = np.clip(rng.normal(2.2, 0.9, (frames, n_items)), 0, 4)
    s = np.where(rng.random((frames, n_items)) < 0.25, 1.5, 0.3)
    judge = np.clip(np.floor(f + 0.5), 0, 4)
    people = np.clip(np.floor(f + s * rng.standard_normal((frames, n_items)) + 0.5), 0, 4)
    edges = np.concatenate([[-np.inf], np.arange(4) + 0.5, [np.inf]])
    prob = np.diff(sps.norm.cdf((edges - f[..., None]) / s[..., None]), axis=-1)
    mean, second = prob @ np.arange(5.0), prob @ np.arange(5.0) ** 2
    return judge, people, mean, second, second - mean**2, prob


@pytest.mark.parametrize("n", [50, 300])
def test_the_frame_estimators_fixed_size_intervals_cover_under_the_active_queue_at_small_sizes(n):
    """#72.4: under the queue's decision priorities, a fixed-size 95 % interval from the frame estimators' sigma
    (estimate -+ 1.96 sigma / sqrt(n) on the z scale) covers the true kappa and Spearman (of 400,000 items of the
    same process) in at least 94 % of 1,200 frames, at 50 ratings and at 300. With the Poisson design's variance
    and no small-sample factor it covered 91-93 % at 50."""
    from scipy import stats as sps

    from eval_pipeline.agreement import sequential as sq

    judge, people, *_ = _frames(np.random.default_rng(1), 1, 400_000)
    kappa, rho = float(sq.kappa_and_sigma(judge[0], people[0])[0]), float(sps.spearmanr(judge[0], people[0])[0])
    frames, n_items = 1200, 900
    rng = np.random.default_rng(40 + n)
    judge, people, mean, second, var, prob = _frames(rng, frames, n_items)
    shares = active.kappa_variance_shares(judge, mean, var, 0.6)
    assert shares is not None
    w = np.stack([active.priorities(np.sqrt(e2)) for e2 in shares])
    keys = rng.random((frames, n_items)) / w  # the order sample's keys, as design.order draws them
    at = np.argsort(keys, axis=1)
    rows = np.arange(frames)[:, None]
    rated = at[:, :n]
    pi = np.minimum(1.0, keys[rows, at[:, n : n + 1]] * w[rows, rated])
    rule = sq.Rule()
    z = 1.959964
    for bounds, args, truth in (
        (sq.ppi_kappa_bounds, (judge, mean, second), kappa),
        (sq.ppi_spearman_bounds, (judge, prob, np.arange(5.0)), rho),
    ):
        est, _, _, sigma = bounds(*args, rated, people[rows, rated], pi, rule)
        centre, half = np.arctanh(est), z * sigma / math.sqrt(n)
        covered = np.mean((np.tanh(centre - half) <= truth) & (truth <= np.tanh(centre + half)))
        assert covered >= 0.94, (bounds.__name__, n, covered)
