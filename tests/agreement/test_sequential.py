"""The anytime-valid trust rule (#58): its kappa is the agreement table's, its verdict settles on the side the
evidence shows, and ``needed`` is an estimate that moves with the ratings (error rates: bench_trust_decisions)."""

from __future__ import annotations

import numpy as np
import pytest

from eval_pipeline.agreement import sequential as sq
from eval_pipeline.agreement import stats as st


def _pairs(rng: np.random.Generator, n: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    truth = rng.standard_normal(n)
    cuts = np.array([-1.3, -0.5, 0.3, 1.1])
    judge = np.searchsorted(cuts, truth + noise * rng.standard_normal(n)) + 1.0
    people = np.searchsorted(cuts, truth + 0.4 * rng.standard_normal(n)) + 1.0
    return judge, people


def test_the_sequence_is_centred_on_the_agreement_tables_kappa():
    judge, people = _pairs(np.random.default_rng(1), 120, 0.6)
    seq = sq.kappa_sequence(judge - 1, people - 1, sq.Rule())
    assert seq.estimate == pytest.approx(st.cohen_kappa(judge, people, [1, 2, 3, 4, 5], "quadratic"), abs=1e-12)
    assert seq.low < seq.estimate < seq.high
    # wider than a fixed-n 95 % interval: it holds at every n at once
    assert seq.high - seq.low > 2 * 1.96 * seq.sigma * (1 - seq.estimate**2) / np.sqrt(120)


def _decided(judge: np.ndarray, people: np.ndarray, rule: sq.Rule) -> tuple[str, int]:
    k = sq.kappa_sequence(judge - 1, people - 1, rule)
    r = sq.spearman_sequence(judge, people, rule)
    return sq.decide([(k, 0.6), (r, 0.5)], rule)


def test_a_good_judge_is_trusted_a_poor_one_untrusted_and_below_the_floor_nothing_is_decided():
    rng = np.random.default_rng(4)
    rule = sq.Rule()
    assert _decided(*_pairs(rng, 200, 0.2), rule) == (sq.TRUSTED, 0)
    assert _decided(*_pairs(rng, 200, 2.5), rule) == (sq.UNTRUSTED, 0)
    verdict, needed = _decided(*_pairs(rng, 12, 0.2), rule)
    assert verdict == sq.PENDING and needed >= 30 - 12


def test_needed_is_an_estimate_that_moves_with_the_ratings():
    rng = np.random.default_rng(7)
    judge, people = _pairs(rng, 400, 0.75)  # a judge near the bar: pending for a while
    rule = sq.Rule()
    seen = {}
    for n in (40, 60, 80):
        verdict, needed = _decided(judge[:n], people[:n], rule)
        if verdict == sq.PENDING:
            seen[n] = needed
    assert len(seen) >= 2 and len(set(seen.values())) == len(seen)  # never the same constant
    # a judge far from the bar needs fewer more ratings than one near it, from the same count
    far = _pairs(np.random.default_rng(8), 20, 0.1)
    near = _pairs(np.random.default_rng(8), 20, 0.75)
    assert _decided(*far, rule)[1] <= _decided(*near, rule)[1]
