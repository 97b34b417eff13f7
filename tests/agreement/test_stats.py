"""Agreement statistics against published worked examples."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score

import eval_pipeline.agreement.stats as st
from eval_pipeline.agreement.compute import compute_agreement
from eval_pipeline.agreement.stats import (
    ceiling_share,
    cohen_kappa,
    fleiss_kappa,
    icc,
    kappa_band,
    krippendorff_alpha,
    percent_agreement,
    prevalence,
)
from eval_pipeline.core.resampling import per_resample

nan = np.nan


def test_cohen_kappa_matches_scikit_learns_published_cases():
    # scikit-learn's test cases (Artstein & Poesio 2008)
    y1 = np.array([0] * 46 + [1] * 44 + [2] * 10)
    y2 = np.array([0] * 52 + [1] * 32 + [2] * 16)
    assert cohen_kappa(y1, y2, [0, 1, 2]) == pytest.approx(0.8013, abs=1e-4)
    y2 = np.array([0] * 50 + [1] * 40 + [2] * 10)
    assert cohen_kappa(y1, y2, [0, 1, 2]) == pytest.approx(0.9315, abs=1e-4)
    assert cohen_kappa(y1, y2, [0, 1, 2], "linear") == pytest.approx(0.9412, abs=1e-4)
    assert cohen_kappa(y1, y2, [0, 1, 2], "quadratic") == pytest.approx(0.9541, abs=1e-4)


def test_weighted_kappa_uses_the_whole_scale():
    a = [1, 2, 2, 5, 5, 2, 1, 5]
    b = [2, 2, 5, 5, 2, 2, 1, 5]
    scale = [1, 2, 3, 4, 5]
    for w in (None, "linear", "quadratic"):
        assert cohen_kappa(a, b, scale, w) == pytest.approx(cohen_kappa_score(a, b, labels=scale, weights=w))
    # only the labels that occur (1, 2, 5 at positions 0, 1, 2) would give a different, wrong, weighted kappa
    assert cohen_kappa(a, b, scale, "quadratic") != pytest.approx(cohen_kappa(a, b, [1, 2, 5], "quadratic"))


def test_fleiss_kappa_on_fleiss_1971_example():
    # the classic 10 subjects x 5 categories, 14 raters (Wikipedia's worked example): kappa = 0.210
    counts = np.array(
        [
            [0, 0, 0, 0, 14],
            [0, 2, 6, 4, 2],
            [0, 0, 3, 5, 6],
            [0, 3, 9, 2, 0],
            [2, 2, 8, 1, 1],
            [7, 7, 0, 0, 0],
            [3, 2, 6, 3, 0],
            [2, 5, 3, 2, 2],
            [6, 5, 2, 1, 0],
            [0, 2, 2, 3, 7],
        ]
    )
    assert fleiss_kappa(counts) == pytest.approx(0.210, abs=1e-3)


def test_krippendorff_alpha_on_krippendorffs_own_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units, missing data
    data = np.array(
        [
            [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
            [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
        ]
    )
    assert krippendorff_alpha(data, "nominal") == pytest.approx(0.743, abs=1e-3)
    assert krippendorff_alpha(data, "ordinal", value_domain=[1, 2, 3, 4, 5]) == pytest.approx(0.815, abs=1e-3)
    assert krippendorff_alpha(data, "interval") == pytest.approx(0.849, abs=1e-3)


def test_icc_on_shrout_and_fleiss_1979_example():
    x = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]])
    absolute, consistency = icc(x)
    assert absolute == pytest.approx(0.29, abs=0.005)  # ICC(2,1)
    assert consistency == pytest.approx(0.71, abs=0.005)  # ICC(3,1)


def test_high_agreement_low_kappa_is_explained_by_prevalence():
    a = [5] * 19 + [4]
    b = [5] * 19 + [5]
    assert percent_agreement(a, b) == 0.95
    assert cohen_kappa(a, b, [1, 2, 3, 4, 5]) == pytest.approx(0.0)
    assert prevalence(a + b) == pytest.approx(39 / 40) and ceiling_share(a + b, 5) == pytest.approx(39 / 40)
    assert [kappa_band(k) for k in (0.85, 0.8, 0.7, 0.6, 0.59)] == ["excellent", "excellent", "good", "good", "poor"]


def test_rank_correlations_match_scipy():
    from scipy.stats import kendalltau, spearmanr

    from eval_pipeline.agreement.stats import kendall, spearman

    rng = np.random.default_rng(3)
    for _ in range(20):
        a = rng.integers(1, 6, 40).astype(float)
        b = np.clip(a + rng.integers(-1, 2, 40), 1, 5).astype(float)
        assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
        assert kendall(a, b) == pytest.approx(kendalltau(a, b).statistic, abs=1e-12)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_vectorised_kappa_bootstrap_equals_the_per_resample_one(weights):
    rng = np.random.default_rng(5)
    labels = [1.0, 2.0, 3.0, 4.0, 5.0]
    for n, spread in ((40, 5), (12, 2), (30, 1)):  # the last: one category only, kappa undefined everywhere
        a = rng.integers(1, 1 + spread, n).astype(float)
        b = np.clip(a + rng.integers(-1, 2, n), 1, spread).astype(float)
        slow = st.bootstrap(per_resample(lambda x, y: st.cohen_kappa(x, y, labels, weights)), [a, b], seed=11)
        fast = st.bootstrap(lambda x, y, idx: st.cohen_kappa_resamples(x, y, labels, weights, idx), [a, b], seed=11)
        assert np.allclose(slow, fast, rtol=0, atol=1e-12, equal_nan=True), (n, spread, slow, fast)
    with pytest.raises(ValueError, match="outside the label set"):
        st.bootstrap(
            lambda x, y, idx: st.cohen_kappa_resamples(x, y, labels, None, idx),
            [np.array([1.0] * 6), np.array([9.0] * 6)],
            seed=1,
        )


def test_vectorised_rank_and_error_bootstraps_equal_the_per_resample_ones():
    rng = np.random.default_rng(8)
    for n in (40, 9):
        a = rng.integers(1, 6, n).astype(float)
        b = np.clip(a + rng.normal(0, 0.8, n).round(), 1, 5)
        b[:3] = 3.0  # ties
        for fn, batch in ((st.spearman, st.spearman_resamples), (st.kendall, st.kendall_resamples)):
            slow = st.bootstrap(per_resample(fn), [a, b], seed=3)
            fast = st.bootstrap(batch, [a, b], seed=3)
            assert np.allclose(slow, fast, rtol=0, atol=1e-12, equal_nan=True), (fn.__name__, n, slow, fast)
    const = np.full(len(a), 4.0)  # no variance in every resample: undefined, as per resample
    assert np.isnan(st.spearman_resamples(const, a, rng.integers(0, len(a), (5, len(a))))).all()
    assert np.isnan(st.spearman_resamples(a, b, np.zeros((5, len(a)), int))).all()  # one item drawn n times


def _resamples_as_scipy(batch, reference, a: np.ndarray, b: np.ndarray, idx: np.ndarray, trial: int) -> np.ndarray:
    """``batch`` (a vectorised rank statistic) against scipy's ``reference`` resample by resample (NaN below 3
    items or when a side is constant); its values."""
    n = idx.shape[1]
    expected = [
        reference(a[i], b[i]).statistic if n >= 3 and len(set(a[i])) > 1 and len(set(b[i])) > 1 else np.nan for i in idx
    ]
    with np.errstate(all="ignore"):
        got = batch(a, b, idx)
    assert np.allclose(got, expected, rtol=0, atol=1e-12, equal_nan=True), (trial, got, expected)
    return got


def test_spearman_resamples_from_contingency_tables_equal_scipy():
    """The table path (few levels: scores on a scale, lengths) and the gather path (many levels) against scipy's
    spearmanr resample by resample, ties and n < 3 included; integer level codes give the same as the values."""
    from scipy import stats as ss

    rng = np.random.default_rng(21)
    for trial in range(400):
        n = int(rng.integers(0, 30))
        a = rng.integers(1, 6, n).astype(float) if trial % 2 else rng.normal(size=n)
        b = rng.integers(1, 4, n).astype(float) if trial % 3 else np.round(rng.normal(size=n), 1)
        idx = rng.integers(0, max(n, 1), (6, n))
        got = _resamples_as_scipy(st.spearman_resamples, ss.spearmanr, a, b, idx, trial)
        if n:
            coded = st.spearman_resamples(st.rank_codes(a), st.rank_codes(b), idx)
            assert np.array_equal(np.isnan(coded), np.isnan(got)) and np.allclose(
                coded, got, atol=1e-12, equal_nan=True
            )
    n = 5000  # both continuous: the table would be n^2 cells, so ranks are gathered; still scipy's value
    a, b = rng.normal(size=n), rng.normal(size=n)
    idx = rng.integers(0, n, (3, n))
    assert np.allclose(st.spearman_resamples(a, b, idx), [ss.spearmanr(a[i], b[i]).statistic for i in idx], atol=1e-12)


def test_kendall_resamples_equal_scipy_on_few_and_many_levels():
    """Tau-b resample by resample against scipy's kendalltau: scores on a scale, near-continuous values (one level
    per item: the running sums over a wide table), ties and n < 3."""
    from scipy import stats as ss

    rng = np.random.default_rng(34)
    for trial in range(300):
        n = int(rng.integers(0, 40))
        a = rng.integers(1, 6, n).astype(float) if trial % 2 else np.round(rng.normal(size=n), 2)
        b = rng.integers(1, 4, n).astype(float) if trial % 3 else rng.normal(size=n)
        _resamples_as_scipy(st.kendall_resamples, ss.kendalltau, a, b, rng.integers(0, max(n, 1), (5, n)), trial)


def test_kendall_resamples_take_wide_tables_a_block_of_resamples_at_a_time(monkeypatch):
    """A continuous side makes each resample's table wide (levels of a x levels of b): the resamples are then
    counted a block at a time, with the very values of all at once."""
    rng = np.random.default_rng(35)
    a, b = rng.normal(size=500), rng.integers(1, 14, 500).astype(float)  # a judge's expected score; a mean
    idx = rng.integers(0, 500, (300, 500))
    whole = st.kendall_resamples(a, b, idx)
    monkeypatch.setattr(st, "KENDALL_TABLE_CELLS", 500 * 13 * 7)  # 7 resamples at a time
    assert np.array_equal(st.kendall_resamples(a, b, idx), whole)
    monkeypatch.setattr(st, "KENDALL_TABLE_CELLS", 1)  # one at a time
    assert np.array_equal(st.kendall_resamples(a, b, idx[:20]), whole[:20])
    assert st.kendall_resamples(a, b, idx[:0]).shape == (0,)


def test_resamples_are_the_draws_of_one_resample_at_a_time():
    """bootstrap draws its (n_boot, n) index matrix in one call: the same numbers as n_boot calls."""
    for n, seed in ((5, 1), (40, 7), (1000, 12345)):
        one_by_one = np.random.default_rng(seed)
        expected = np.stack([one_by_one.integers(0, n, n) for _ in range(300)])
        assert np.array_equal(np.random.default_rng(seed).integers(0, n, (300, n)), expected)


# Fleiss (1971), Table 1: 30 patients, each diagnosed by 6 psychiatrists drawn from a pool of 43 (the raters differ
# from patient to patient); categories 1-5. Published kappa 0.430 (irr::kappam.fleiss: 0.4302445).
FLEISS_1971 = [
    [4, 4, 4, 4, 4, 4], [2, 2, 2, 5, 5, 5], [2, 3, 3, 3, 3, 5], [5, 5, 5, 5, 5, 5], [2, 2, 2, 4, 4, 4],
    [1, 1, 3, 3, 3, 3], [3, 3, 3, 3, 5, 5], [1, 1, 3, 3, 3, 4], [1, 1, 4, 4, 4, 4], [5, 5, 5, 5, 5, 5],
    [1, 4, 4, 4, 4, 4], [1, 2, 4, 4, 4, 4], [2, 2, 2, 3, 3, 3], [1, 4, 4, 4, 4, 4], [2, 2, 4, 4, 4, 5],
    [3, 3, 3, 3, 3, 5], [1, 1, 1, 4, 5, 5], [1, 1, 1, 1, 1, 2], [2, 2, 4, 4, 4, 4], [1, 3, 3, 5, 5, 5],
    [5, 5, 5, 5, 5, 5], [2, 4, 4, 4, 4, 4], [2, 2, 4, 5, 5, 5], [1, 1, 4, 4, 4, 4], [1, 4, 4, 4, 4, 5],
    [2, 2, 2, 2, 2, 4], [1, 1, 1, 1, 5, 5], [2, 2, 4, 4, 4, 4], [1, 3, 3, 3, 3, 3], [5, 5, 5, 5, 5, 5],
]  # fmt: skip


def _long(rows: list[list[int]], rater_of, dim: str = "persona_consistency", kind: str = "human") -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(checkpoint_id="c", sample_id=f"p{i}", evaluator=rater_of(i, k), rater_kind=kind, dimension=dim,
                 score=float(v), source_file="f.csv", line_number=i + 2)
            for i, row in enumerate(rows)
            for k, v in enumerate(row)
        ]
    )  # fmt: skip


def test_fleiss_kappa_for_pooled_raters_on_fleiss_1971s_own_data(rubrics):
    """Different raters per item, the same number per item: Fleiss's own design, not omitted any more."""
    pooled = _long(FLEISS_1971, lambda i, k: f"psy{(i * 6 + k) % 43}")
    rows = compute_agreement(rubrics["npc_dialogue"], "c", pooled, None)
    fleiss = rows[(rows.statistic == "fleiss_kappa") & (rows.dimension == "persona_consistency")].iloc[0]
    assert fleiss.value == pytest.approx(0.4302445, abs=1e-6)
    assert fleiss.n_items == 30 and fleiss.n_raters == 6 and "pool of 43" in fleiss.label
    # a count that differs: the items with the most common count are used, and the row says how many were left out
    uneven = pooled[~((pooled.sample_id == "p0") & (pooled.evaluator == "psy0"))]
    row = compute_agreement(rubrics["npc_dialogue"], "c", uneven, None)
    row = row[(row.statistic == "fleiss_kappa") & (row.dimension == "persona_consistency")].iloc[0]
    assert row.n_items == 29 and "1 items with another count left out" in row.label
    sub = np.array(FLEISS_1971[1:])
    assert row.value == pytest.approx(fleiss_kappa(np.stack([(sub == c).sum(axis=1) for c in range(1, 6)], axis=1)))


def test_model_raters_are_their_own_set_and_never_in_the_human_mean(rubrics):
    rubric = rubrics["npc_dialogue"]
    humans = _long([r[:3] for r in FLEISS_1971], lambda i, k: f"h{k}")
    models = _long([[5, 5] for _ in FLEISS_1971], lambda i, k: f"llm{k}", kind="model")
    judge = pd.DataFrame(
        [dict(checkpoint_id="c", sample_id=f"p{i}", judge="panel", kind="dimension", dimension="persona_consistency",
              score=float(np.mean(r[:3]))) for i, r in enumerate(FLEISS_1971)]
    )  # fmt: skip
    both = compute_agreement(rubric, "c", pd.concat([humans, models]), judge)
    only = compute_agreement(rubric, "c", humans, judge)
    jh = "judge~human_mean"
    pick = lambda df, raters, stat: df[(df.raters == raters) & (df.statistic == stat)].value.iloc[0]
    # the judge against the human mean is what it is without the models' constant 5s
    assert pick(both, jh, "mean_absolute_error") == pytest.approx(pick(only, jh, "mean_absolute_error"))
    assert pick(both, jh, "mean_absolute_error") == pytest.approx(0.0)
    assert pick(both, "judge~model_mean", "mean_absolute_error") > 0.5
    assert "all_models" not in set(only.raters) and "llm0~llm1" in set(both.raters)
    assert not any("llm" in r and "h" in r.split("~")[0] for r in both.raters)  # no human-model pairs mixed in
    # Spearman and Kendall for every human pair
    for pair in ("h0~h1", "h0~h2", "h1~h2"):
        assert {"spearman", "kendall"} <= set(both[both.raters == pair].statistic)
    a, b = np.array(FLEISS_1971)[:, 0], np.array(FLEISS_1971)[:, 1]
    assert pick(both, "h0~h1", "spearman") == pytest.approx(scipy_stats.spearmanr(a, b).statistic)
    # the rubric can count models as humans when a team says so
    merged = rubric.model_copy(
        update={"human_ratings": rubric.human_ratings.model_copy(update={"models_in_human_mean": True})}
    )
    mixed = compute_agreement(merged, "c", pd.concat([humans, models]), judge)
    assert pick(mixed, jh, "mean_absolute_error") > 0.1


def test_statistics_bootstrapped_together_get_the_interval_each_gets_alone():
    """bootstrap_many draws the resamples once for several statistics (length bias over a 100k-sample
    checkpoint: one draw, not one per score); each interval is the one bootstrap gives it with that seed."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 40, 3000)
    ys = [rng.integers(1, 6, 3000) for _ in range(3)]
    together = st.bootstrap_many([(st.spearman_resamples, [y, x]) for y in ys], seed=77)
    alone = [st.bootstrap(st.spearman_resamples, [y, x], seed=77) for y in ys]
    assert together == alone and len(set(together)) == 3
    (few,) = st.bootstrap_many([(st.spearman_resamples, [ys[0][:4], x[:4]])], seed=1)  # under 5 items: none
    assert np.isnan(few).all()


def test_pooled_counts_keeps_the_items_with_the_most_common_number_of_ratings():
    """Fleiss's table: items rated by the modal number of raters (the larger on a tie), NaN scores not counted,
    a score off the labels not counted, items rated once left out of the count of rated items."""
    import pandas as pd

    from eval_pipeline.agreement.compute import pooled_counts

    rows = [
        ("c1", "a", 1.0), ("c1", "a", 2.0), ("c1", "a", 2.0),  # 3 ratings
        ("c1", "b", 3.0), ("c1", "b", 3.0), ("c1", "b", 1.0),  # 3 ratings
        ("c2", "a", 1.0), ("c2", "a", 1.0),  # 2 ratings (another checkpoint's "a")
        ("c2", "b", 2.0), ("c2", "b", 3.0), ("c2", "b", None),  # 2 ratings and a missing one
        ("c2", "c", 1.0),  # rated once
    ]  # fmt: skip
    long = pd.DataFrame(rows, columns=["checkpoint_id", "sample_id", "score"])
    counts, modal, rated = pooled_counts(long, [1.0, 2.0, 3.0])
    assert (modal, rated) == (3, 4)  # 2 items with 3 ratings, 2 with 2: the tie goes to the larger
    assert sorted(map(tuple, counts.tolist())) == [(1, 0, 2), (1, 2, 0)]
    counts, modal, rated = pooled_counts(long[long.checkpoint_id == "c2"], [1.0, 2.0, 3.0])
    assert (modal, rated) == (2, 2)
    assert sorted(map(tuple, counts.tolist())) == [(0, 1, 1), (2, 0, 0)]
    off_scale = pd.concat([long, pd.DataFrame([("c1", "a", 9.0)], columns=long.columns)])
    counts, modal, rated = pooled_counts(off_scale, [1.0, 2.0, 3.0])
    # c1's "a" has 4 ratings now (the off-scale one counted as a rating, not in the table): 2 is the most common
    assert (modal, rated) == (2, 4) and sorted(map(tuple, counts.tolist())) == [(0, 1, 1), (2, 0, 0)]
    assert pooled_counts(long.iloc[:0], [1.0, 2.0])[1:] == (0, 0)


def test_gwet_ac1_on_the_kappa_paradox_table():
    """Feinstein & Cicchetti (1990), "High agreement but low kappa", their table: 118 both yes, 5 and 2 split, 0
    both no: 94.4 % agreement and kappa -0.02 (as published); Gwet's (2008) AC1 by hand from its definition:
    pi_yes = (123/125 + 120/125) / 2 = 0.972, pe = 2 * 0.972 * 0.028 = 0.054432, AC1 = (0.944 - pe) / (1 - pe)."""
    a = np.array([1] * 118 + [1] * 5 + [0] * 2, float)
    b = np.array([1] * 118 + [0] * 5 + [1] * 2, float)
    assert st.percent_agreement(a, b) == pytest.approx(0.944)
    assert st.cohen_kappa(a, b, [0, 1]) == pytest.approx(-0.0234, abs=5e-4)
    assert st.gwet_ac1(a, b, [0, 1]) == pytest.approx((0.944 - 0.054432) / (1 - 0.054432), abs=1e-12)
    # two raters who agree on 8 of 10 items, one passing all 10: kappa 0, AC1 high
    one = np.ones(10)
    other = np.array([1] * 8 + [0] * 2, float)
    assert st.cohen_kappa(one, other, [0, 1]) == 0.0 and st.gwet_ac1(one, other, [0, 1]) > 0.75


def test_every_kappa_row_has_ac1_beside_it(rubrics):
    rubric = rubrics["kg_qa"]
    rng = np.random.default_rng(2)
    rows = [
        dict(checkpoint_id="c", sample_id=f"s{i}", evaluator=e, rater_kind="human", dimension=d, score=float(v))
        for i in range(30)
        for d in rubric.rating_scales
        for e, v in (("ann", 5), ("bo", 5 if rng.random() < 0.9 else 4))
    ]
    ag = compute_agreement(rubric, "c", pd.DataFrame(rows), None)
    pair = ag[ag.raters == "ann~bo"].set_index(["dimension", "statistic"]).value
    for dim in rubric.rating_scales:
        assert pair[(dim, "cohen_kappa")] <= 0.05 < 0.8 < pair[(dim, "gwet_ac1")]  # the paradox, and its answer
