"""eval_pipeline.core.distributions returns what the scipy.stats calls it replaces return, value for value."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from eval_pipeline.core import distributions as d


@pytest.mark.parametrize("q", [1e-12, 0.001, 0.025, 0.05, 0.3, 0.5, 0.8, 0.975, 0.995, 1 - 1e-9])
def test_normal_and_t_quantiles_and_tails_are_scipys(q):
    assert d.norm_ppf(q) == float(stats.norm.ppf(q))
    for df in (1, 2, 3.5, 7, 29, 120, 1e6):
        assert d.t_ppf(q, df) == float(stats.t.ppf(q, df)), df
    for x in (-8.0, -1.96, -0.1, 0.0, 0.7, 1.96, 5.0, 38.0):
        assert d.norm_sf(x) == float(stats.norm.sf(x))


def test_the_paired_t_tests_p_value_is_scipys():
    rng = np.random.default_rng(7)
    for n in (2, 3, 5, 12, 60, 400):
        for shift in (0.0, 0.05, 0.4, 3.0):
            x = rng.normal(shift, 1.0, n).round(rng.integers(0, 4))
            if np.std(x) == 0:
                continue
            assert d.t_test_p(x) == float(stats.ttest_1samp(x, 0.0).pvalue), (n, shift)


def test_average_ranks_are_scipys_rankdata_ties_and_nan_included():
    rng = np.random.default_rng(11)
    cases = [
        rng.integers(1, 6, (50, 17)).astype(float),  # ratings on a 1-5 scale: many ties
        rng.normal(size=(7, 40)),
        rng.integers(0, 3, (3, 4, 9)).astype(float),  # more than two axes
        np.array([[3.0, np.nan, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0]]),  # a NaN row, a constant row
        np.array([5.0, 1.0, 5.0, 2.0, 2.0, 2.0]),  # one axis
    ]
    for x in cases:
        ours, theirs = d.average_ranks(x), stats.rankdata(x, axis=-1)
        assert ours.shape == theirs.shape and ours.dtype == np.float64
        assert np.array_equal(ours, theirs, equal_nan=True), (x, ours, theirs)


def test_building_the_definitions_does_not_import_scipy_stats():
    """What the module is for: a process that builds the definitions (a command, a code server, a launched run)
    pays for scipy.stats only if it asks a question that needs it."""
    import subprocess
    import sys

    code = "import sys, eval_pipeline.defs.definitions; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
