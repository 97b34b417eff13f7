"""Large rater panels (#36.23): agreement stays linear in raters past the pairwise limit, and what it reports
for each rater is the exact number the pairs would give."""

import pandas as pd
import pytest

from eval_pipeline.agreement.compute import compute_agreement
from eval_pipeline.devtools.panels import rater_panel


def test_past_the_pairwise_limit_each_rater_is_compared_with_the_others_exactly(rubrics):
    """#36.23: every pair of 1,000 raters would take hours; each rater's share of agreeing rating pairs is the
    same number the pairs give (their agreements over their shared items), and the pooled rows are unchanged."""
    rubric = rubrics["npc_dialogue"]
    small = rubric.model_copy(update={"human_ratings": rubric.human_ratings.model_copy(update={"pairwise_up_to": 2})})
    ratings = rater_panel(6)
    pairs = compute_agreement(rubric, "c", ratings, None)
    summary = compute_agreement(small, "c", ratings, None)
    dim = "persona_consistency"
    for r in sorted(ratings.evaluator.unique()):
        mine = pairs[(pairs.dimension == dim) & (pairs.statistic == "percent_agreement")
                     & pairs.raters.str.split("~").apply(lambda x, r=r: r in x)]  # fmt: skip
        expected = (mine.value * mine.n_items).sum() / mine.n_items.sum()
        got = summary[(summary.raters == f"{r}~others") & (summary.statistic == "percent_agreement")].value.iloc[0]
        assert got == pytest.approx(expected, abs=1e-12)
    assert not summary.raters.str.fullmatch(r"r\d+~r\d+").any()
    pooled = lambda df: df[df.raters == "all_humans"].set_index(["dimension", "statistic"]).value  # noqa: E731
    pd.testing.assert_series_equal(pooled(pairs), pooled(summary))


def test_agreement_grows_linearly_with_the_number_of_raters(rubrics, monkeypatch):
    """#36.23: 2/20/40/80 raters took 11/21/62/187 s (every pair bootstrapped). Past the pairwise limit the work is
    counted, not timed: the bootstraps do not grow with the raters (the pooled and judge rows only), and the rows
    grow by one set per rater, not per pair (the time figures are bench/bench_agreement.py's)."""
    from eval_pipeline.agreement import stats

    rubric = rubrics["npc_dialogue"]
    real = stats.bootstrap
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(stats, "bootstrap", counted)

    def work(n):
        calls.clear()
        rows = compute_agreement(rubric, "c", rater_panel(n), None)
        return len(calls), len(rows)

    (boot20, rows20), (boot80, rows80) = work(20), work(80)
    assert boot80 == boot20, (boot20, boot80)
    per_rater = (rows80 - rows20) / 60
    assert rows80 == rows20 + 60 * per_rater and per_rater == int(per_rater) and 0 < per_rater <= 4, (rows20, rows80)
