"""Length bias on known cases: a judge whose score is length plus noise is flagged against humans who ignore
length, and the length-controlled mean recovers a quality change planted under a length change."""

import numpy as np
import pandas as pd
import pytest

from eval_pipeline.agreement.length_bias import length_bias, log_words


def _checkpoint(rng, n, quality, words_mu, length_weight, noise=0.3):
    words = np.maximum(3, rng.normal(words_mu, words_mu / 4, n)).round()
    lw = np.log1p(words)
    q = quality + rng.normal(0, 0.5, n)  # what the answer is worth, independent of its length
    judge = q + length_weight * (lw - np.log1p(40)) + rng.normal(0, noise, n)
    ids = [f"s{i}" for i in range(n)]
    return (
        pd.DataFrame({"sample_id": ids, "accuracy": judge}),
        pd.Series(lw, index=ids),
        pd.Series(q + rng.normal(0, noise, n), index=ids),
    )


def test_a_judge_that_rewards_length_is_flagged_and_humans_that_do_not_are_the_baseline():
    rng = np.random.default_rng(7)
    scores, lengths, humans = _checkpoint(rng, 400, 3.0, 40, length_weight=1.5)
    row = length_bias("c", scores, lengths, {"accuracy": humans}, ["accuracy"], None).iloc[0]
    assert row.judge_length_rho > 0.4 and abs(row.human_length_rho) < 0.15
    assert row.flagged and row.gap_ci_low > 0 and row.n_rated == 400
    fair, lengths2, humans2 = _checkpoint(np.random.default_rng(8), 400, 3.0, 40, length_weight=0.0)
    row = length_bias("c", fair, lengths2, {"accuracy": humans2}, ["accuracy"], None).iloc[0]
    assert not row.flagged and row.gap_ci_low < 0 < row.gap_ci_high


def test_the_length_controlled_change_recovers_the_planted_quality_change():
    rng = np.random.default_rng(11)
    weight, planted = 1.2, 0.4
    parent, p_len, _ = _checkpoint(rng, 3000, 3.0, 40, weight)
    child, c_len, _ = _checkpoint(rng, 3000, 3.0 + planted, 120, weight)  # three times longer answers
    ref = float(p_len.mean())
    p = length_bias("p", parent, p_len, {}, ["accuracy"], None).iloc[0]
    c = length_bias("c", child, c_len, {}, ["accuracy"], ref).iloc[0]
    raw_change = c["mean"] - p["mean"]
    controlled_change = c.length_controlled_mean - p.length_controlled_mean
    assert raw_change > planted + 0.8  # the length change inflates the raw change ...
    assert controlled_change == pytest.approx(planted, abs=0.08)  # ... and the controlled one is the planted one
    assert p.length_controlled_mean == pytest.approx(p["mean"])  # no parent: its own length is the reference
    assert np.isnan(c.rated_judge_length_rho) and not c.flagged  # no ratings: nothing to compare


def test_log_words():
    assert list(log_words(pd.Series(["a b c", "", None]))) == pytest.approx([np.log(4), 0.0, 0.0])


def test_constant_lengths_or_scores_leave_nothing_to_control():
    """#32.5: responses of one length (a log-length std of 4e-16 is rounding) and scores all 10: no slope is fitted
    to rounding noise, and the controlled mean is the mean (it was 9.27 for scores that are all 10)."""
    import numpy as np

    from eval_pipeline.agreement.length_bias import _controlled

    x = np.full(40, np.log(23.0)) + np.r_[np.zeros(39), 4.4e-16]
    y = np.full(40, 10.0)
    out = _controlled(y, x, reference=float(np.log(30.0)))
    assert out["slope_per_log_word"] == 0.0 and out["length_controlled_mean"] == 10.0
    out = _controlled(np.arange(40, dtype=float), x, reference=None)
    assert out["slope_per_log_word"] == 0.0 and out["length_controlled_mean"] == np.mean(np.arange(40))
