"""Human-calibrated estimates (#32.3): PPI++ against a simulated judge with a known bias and noise."""

import numpy as np
import pandas as pd
import pytest

from eval_pipeline.agreement.ppi import classical_mean, ppi_change, ppi_mean

TRIALS, N, RATED_SHARE, TRUE_MEAN = 1000, 600, 0.10, 3.0


def _trial(rng: np.random.Generator) -> tuple:
    y_all = rng.normal(TRUE_MEAN, 1.0, N)  # what people would say of every sample
    f_all = 0.8 * y_all + 0.4 + 0.5 + rng.normal(0.0, 0.5, N)  # the judge: compressed, leaning +0.3, noisy
    rated = rng.random(N) < RATED_SHARE  # people rate a random ~10 %
    return y_all[rated], f_all[rated], f_all[~rated], f_all


def test_the_ppi_interval_covers_the_true_mean_where_the_judge_alone_does_not_and_is_no_wider_than_people_alone():
    rng = np.random.default_rng(20261126)
    ppi_hits = judge_hits = 0
    ppi_width = human_width = 0.0
    for _ in range(TRIALS):
        y, f, fu, f_all = _trial(rng)
        est = ppi_mean(y, f, fu)
        ppi_hits += est.ci_low <= TRUE_MEAN <= est.ci_high
        _, lo, hi = classical_mean(f_all)
        judge_hits += lo <= TRUE_MEAN <= hi
        _, hlo, hhi = classical_mean(y)
        ppi_width += est.ci_high - est.ci_low
        human_width += hhi - hlo
    coverage = ppi_hits / TRIALS
    print(
        f"PPI++ coverage {coverage:.3f} at nominal 0.95; judge-only {judge_hits / TRIALS:.3f}; "
        f"mean width PPI {ppi_width / TRIALS:.3f} vs people-only {human_width / TRIALS:.3f}"
    )
    assert coverage >= 0.93
    assert judge_hits / TRIALS < 0.5  # the judge alone is confidently wrong
    assert ppi_width <= human_width


def test_ppi_matches_the_reference_formulas_and_its_edges():
    y = np.array([3.0, 4.0, 2.0, 5.0, 3.0])
    f = np.array([3.5, 4.5, 2.0, 4.5, 3.5])
    fu = np.array([4.0, 3.0, 5.0, 2.5, 3.5, 4.5])
    # lambda 0 is the people's mean; lambda 1 is plain PPI: mean(fu) - mean(f - y)
    assert ppi_mean(y, f, fu, lam=0.0).mean == y.mean()
    assert abs(ppi_mean(y, f, fu, lam=1.0).mean - (fu.mean() - (f - y).mean())) < 1e-12
    # the variance-minimising lambda, as ppi_py computes it
    lam = np.mean((y - y.mean()) * (f - f.mean())) / ((1 + len(y) / len(fu)) * np.var(np.r_[f, fu], ddof=1))
    assert abs(ppi_mean(y, f, fu).lam - lam) < 1e-12
    # the interval (#48): residual variance on n - 2 degrees of freedom (lambda fitted), t(n - 2)
    from scipy import stats

    est = ppi_mean(y, f, fu)
    se = np.sqrt(np.var(lam * fu, ddof=1) / len(fu) + np.var(y - lam * f, ddof=2) / len(y))
    q = stats.t.ppf(0.975, len(y) - 2)
    assert abs(est.se - se) < 1e-12 and abs(est.ci_high - (est.mean + q * se)) < 1e-12
    fixed = ppi_mean(y, f, fu, lam=1.0)  # lambda given, not fitted: n - 1
    se1 = np.sqrt(np.var(fu, ddof=1) / len(fu) + np.var(y - f, ddof=1) / len(y))
    assert abs(fixed.ci_low - (fixed.mean - stats.t.ppf(0.975, len(y) - 1) * se1)) < 1e-12
    # too little data: NaN with a reason, never a number (a fitted lambda needs 3 rated samples)
    one = ppi_mean(y[:1], f[:1], fu)
    assert np.isnan(one.mean) and "at least 3" in one.reason
    assert "at least 3" in ppi_mean(y[:2], f[:2], fu).reason and not ppi_mean(y[:2], f[:2], fu, lam=1.0).reason
    assert "nothing for the judge" in ppi_mean(y, f, fu[:1]).reason


def _change_trial(rng: np.random.Generator, true_change: float, rated_share: float, paired: bool) -> tuple:
    """Two checkpoints on the same 300 prompts (a prompt's difficulty is shared), the judge saturated (it sees
    a quarter of the change) and leaning; people rate the same random subset of both (``paired``) or each its own."""
    n = 300
    difficulty = rng.normal(0.0, 0.6, n)
    y_p = 3.5 + difficulty + rng.normal(0.0, 0.8, n)
    y_c = 3.5 + true_change + difficulty + rng.normal(0.0, 0.8, n)
    f_p = 4.2 + 0.25 * (y_p - 3.5) + rng.normal(0.0, 0.3, n)
    f_c = 4.2 + 0.25 * (y_c - 3.5) + rng.normal(0.0, 0.3, n)
    ids = pd.Index([f"s{i}" for i in range(n)])
    rated_p = rng.random(n) < rated_share
    rated_c = rated_p if paired else rng.random(n) < rated_share
    return (
        pd.Series(f_c, ids),
        pd.Series(y_c, ids)[rated_c],
        pd.Series(f_p, ids),
        pd.Series(y_p, ids)[rated_p],
    )


@pytest.mark.slow
def test_the_calibrated_change_covers_the_true_change_paired_or_not_and_sees_what_a_saturated_judge_hides():
    """A drop of 0.5 the judge sees a quarter of: the PPI++ change interval covers the true change in >= 93 % of
    seeded trials (paired: the same samples rated in both; unpaired: each its own), and its test rejects 'no
    change' far more often than the judge's own mean change would be believed at its face value."""
    rng = np.random.default_rng(32)
    for paired in (True, False):
        hits = rejected = 0
        trials = 300
        for _ in range(trials):
            ch = ppi_change(*_change_trial(rng, -0.5, 0.3, paired))
            assert ch.paired == paired and not ch.reason
            hits += ch.ci_low <= -0.5 <= ch.ci_high
            rejected += ch.p_value < 0.05
        print(f"paired={paired}: coverage {hits / trials:.3f}, power {rejected / trials:.3f}")
        assert hits / trials >= 0.93
        assert rejected / trials >= 0.8
    # no change: the test's false alarms stay near its level
    false = sum(ppi_change(*_change_trial(rng, 0.0, 0.3, True)).p_value < 0.05 for _ in range(300))
    assert false / 300 <= 0.08


def test_a_calibrated_change_without_enough_ratings_is_nan_with_its_reason():
    rng = np.random.default_rng(1)
    f_c, y_c, f_p, y_p = _change_trial(rng, 0.0, 0.3, True)
    ch = ppi_change(f_c, y_c.iloc[:1], f_p, y_p)
    assert np.isnan(ch.delta) and "at least 2" in ch.reason
    everything = ppi_change(f_c, pd.Series(f_c.to_numpy() - 0.3, f_c.index), f_p, pd.Series(f_p.to_numpy(), f_p.index))
    assert everything.paired and abs(everything.delta - ((f_c - 0.3) - f_p).mean()) < 1e-12  # all rated: their mean


def test_lambda_is_clipped_to_the_unit_interval_as_ppi_py_clips_it():
    """#48: a judge anti-correlated with people gave lambda -0.52 and 3.0437 [2.392, 3.696] where ppi_py (its
    lambda clipped to [0, 1]) gives the people's own estimate: lambda 0."""
    import numpy as np

    from eval_pipeline.agreement.ppi import ppi_mean

    rng = np.random.default_rng(3)
    y = rng.integers(1, 6, 40).astype(float)
    f = 6 - y + rng.normal(0, 0.3, 40)  # the judge scores backwards
    fu = rng.uniform(1, 5, 400)
    est = ppi_mean(y, f, fu)
    assert est.lam == 0.0
    assert est.mean == y.mean()  # lambda 0: the people's mean alone
    # #72: and the people's own interval, not one a degree of freedom wider (8.1 % at n = 10)
    for n in (10, 40):
        est = ppi_mean(y[:n], f[:n], fu)
        assert est.lam == 0.0
        assert (est.ci_low, est.ci_high) == pytest.approx(classical_mean(y[:n])[1:], rel=1e-12)
    assert ppi_mean(y, y + 0.01 * rng.normal(size=40), fu * 0 + y.mean(), lam=None).lam <= 1.0
