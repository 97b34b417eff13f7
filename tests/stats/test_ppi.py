"""Human-calibrated estimates (#32.3): PPI++ against a simulated judge with a known bias and noise."""

import numpy as np

from eval_pipeline.agreement.ppi import classical_mean, ppi_mean

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
    # too little data: NaN with a reason, never a number
    one = ppi_mean(y[:1], f[:1], fu)
    assert np.isnan(one.mean) and "at least 2" in one.reason
    assert "nothing for the judge" in ppi_mean(y, f, fu[:1]).reason
