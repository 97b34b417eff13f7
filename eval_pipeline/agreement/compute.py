"""The agreement table: human-human and judge-human statistics per dimension.

Rows: checkpoint (or 'ALL'), dimension, statistic, the raters compared, n_items,
n_raters, value, a seeded bootstrap CI where meaningful, and next to every kappa
the prevalence (share of the most common category) and the share of ratings at
the scale's ceiling, so a low kappa on data where raters agree 95 % of the time
is explained rather than hidden.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from eval_pipeline.agreement import active
from eval_pipeline.agreement import stats as st
from eval_pipeline.agreement.pass_fail import pass_fail_rows
from eval_pipeline.core.config import RubricConfig, Scale
from eval_pipeline.core.contracts import (
    AGREEMENT_COLUMNS,
    ALL_HUMANS,
    ALL_MODELS,
    BETWEEN_JUDGE,
    HUMAN_MEAN,
    JUDGE,
    JUDGE_CHOSEN,
    MODEL_MEAN,
    PANEL,
    RATED_AT,
    between,
    rater_pair,
    rater_vs_others,
)
from eval_pipeline.core.resampling import in_item_order, items_seed
from eval_pipeline.core.types import Row


def judge_on_human_scale(rubric: RubricConfig, judge_long: pd.DataFrame, column: str = "score") -> pd.DataFrame:
    """Panel scores per (checkpoint, sample, dimension) on the scale humans rate: questionnaire metric sums
    become mean item scores (sum / items). ``column``: ``score`` (what feeds the scores) or ``chosen_score``
    (what the judge wrote, when the scores are expected values from its token probabilities)."""
    panel = judge_long[(judge_long.judge == PANEL) & judge_long.kind.isin(["dimension", "questionnaire_metric"])].copy()
    panel["score"] = panel[column]
    if rubric.questionnaire:
        n_items = {m.key: len(m.items) for m in rubric.questionnaire.metrics}
        qm = panel.kind == "questionnaire_metric"
        panel.loc[qm, "score"] = panel.loc[qm, "score"] / panel.loc[qm, "dimension"].map(n_items)
    return panel[["checkpoint_id", "sample_id", "dimension", "score"]]


def predictions_on_human_scale(rubric: RubricConfig, judge_long: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per dimension, every judged sample's panel score and the judge's prediction of people's score (``mean``,
    ``second``: agreement.active.panel_predictions) on the scale people rate, as ``judge_on_human_scale`` puts
    the scores (``divide``: what the stored distribution's values are divided by to get there): the frame an
    actively drawn calibration set is weighted back to."""
    kinds = judge_long.kind.isin(["dimension", "questionnaire_metric"]) | (judge_long.judge != PANEL)
    pred = active.panel_predictions(judge_long[kinds & (judge_long.kind != "questionnaire_item")])
    if rubric.questionnaire and len(pred):
        n_items = {m.key: len(m.items) for m in rubric.questionnaire.metrics}
        k = pred.dimension.map(n_items).astype(float).fillna(1.0)
        pred = pred.assign(score=pred.score / k, mean=pred["mean"] / k, second=pred.second / (k * k), divide=k)
    else:
        pred = pred.assign(divide=1.0)
    return {str(d): g.reset_index(drop=True) for d, g in pred.groupby("dimension", sort=True)}


def _kappa_rows(base: Row, a: np.ndarray, b: np.ndarray, labels: list[float], top: float, seed: int) -> list[Row]:
    rows = []
    both = np.concatenate([a, b])
    prev, ceil = st.prevalence(both), st.ceiling_share(both, top)
    for name, w in (("cohen_kappa", None), ("cohen_kappa_linear", "linear"), ("cohen_kappa_quadratic", "quadratic")):
        v = st.cohen_kappa(a, b, labels, w)
        lo, hi = st.bootstrap(
            lambda x, y, idx, w=w: st.cohen_kappa_resamples(x, y, labels, w, idx), [a, b], seed + len(name)
        )
        rows.append(
            {
                **base,
                "statistic": name,
                "value": v,
                "ci_low": lo,
                "ci_high": hi,
                "prevalence": prev,
                "ceiling_share": ceil,
                "label": st.kappa_band(v),
            }
        )
    rows.append(
        {
            **base,
            "statistic": "gwet_ac1",
            "value": st.gwet_ac1(a, b, labels),
            "ci_low": None,
            "ci_high": None,
            "prevalence": prev,
            "ceiling_share": ceil,
            "label": "Gwet's AC1 (nominal): robust where a skewed scale makes kappa low",
        }
    )
    return rows


def _kinds(ratings: pd.DataFrame) -> pd.Series:
    """Each rating's ``rater_kind`` (human where none is said)."""
    kind = ratings["rater_kind"] if "rater_kind" in ratings.columns else pd.Series("human", index=ratings.index)
    return kind.fillna("human")


def people_in(ratings: pd.DataFrame) -> set[str]:
    """The raters of ``ratings`` who are people (``rater_kind`` human, or no kind said): the only ones whose
    agreement with each other is the people's baseline, whatever set their ratings are pooled in."""
    return set(ratings.loc[(_kinds(ratings) == "human").to_numpy(), "evaluator"].astype(str))


def rater_sets(rubric: RubricConfig, ratings: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The ratings split by who gave them: ``human`` (people; model raters too when the rubric says
    ``models_in_human_mean``) and ``model`` (imported model raters). Only the human set feeds ``human_mean``."""
    kind = _kinds(ratings)
    humans = ratings if rubric.human_ratings.models_in_human_mean else ratings[kind == "human"]
    return {"human": humans, "model": ratings[kind == "model"]}


@dataclass
class Panel:
    """One dimension's ratings by one set of raters: items (a (checkpoint, sample) code each, in the order
    (checkpoint, sample) sort in) x raters (sorted by name), NaN where a rater did not rate an item; a rater's
    first score of an item counts, as a pivot table's ``first``. Built with numpy, not a pivot table, and read
    by position: agreement made a few hundred pandas calls per dimension, ~40 % of its time."""

    items: np.ndarray
    raters: list[str]
    scores: np.ndarray

    @cached_property
    def means(self) -> np.ndarray:
        """Each item's mean over the raters who rated it (summed rater after rater, as pandas' row mean does)."""
        by_rater = np.ascontiguousarray(self.scores.T)
        rated = ~np.isnan(by_rater)
        return np.asarray(np.where(rated, by_rater, 0.0).sum(axis=0) / rated.sum(axis=0))


def panel_of(subset: pd.DataFrame, items: np.ndarray) -> Panel:
    """The panel of ``subset`` (ratings of one dimension), whose rows have the item codes ``items``."""
    rated = subset["score"].notna().to_numpy()
    codes, score = items[rated], subset["score"].to_numpy(float)[rated]
    rater_code, raters = pd.factorize(subset["evaluator"].to_numpy()[rated], sort=True)
    kept, row = np.unique(codes, return_inverse=True)
    cells, first = np.unique(row * len(raters) + rater_code, return_index=True)
    scores = np.full(len(kept) * len(raters), np.nan)
    scores[cells] = score[first]
    return Panel(kept, [str(r) for r in raters], scores.reshape(len(kept), len(raters)))


def item_codes(*frames: pd.DataFrame) -> list[np.ndarray]:
    """A code per (checkpoint_id, sample_id) of each frame's rows, the same across the frames, ordered as the
    pairs sort (checkpoint first)."""
    both = [pd.concat([f[c] for f in frames], ignore_index=True) for c in ("checkpoint_id", "sample_id")]
    ckpt, _ = pd.factorize(both[0], sort=True)
    sample, samples = pd.factorize(both[1], sort=True)
    codes = ckpt.astype(np.int64) * max(len(samples), 1) + sample
    bounds = np.cumsum([0, *(len(f) for f in frames)])
    return [codes[a:b] for a, b in itertools.pairwise(bounds)]


def _dimension_rows(
    rubric: RubricConfig,
    ckpt: str,
    dim: str,
    ratings: pd.DataFrame,
    items: np.ndarray,
    judge: tuple[np.ndarray, np.ndarray],
    chosen: tuple[np.ndarray, np.ndarray] | None,
    people: set[str],
) -> list[Row]:
    """``ratings``: the dimension's (indexed by position), with their item codes ``items``; ``judge`` (and
    ``chosen``, the written scores beside expected ones): the panel's item codes and scores of ``dim``; ``people``:
    the raters who are people (``people_in``, for ``agreement.between``)."""
    scale = rubric.rating_scales[dim]
    labels = [float(x) for x in scale.labels]
    rows: list[Row] = []
    for kind, subset in rater_sets(rubric, ratings).items():
        if subset.empty:
            continue
        panel = panel_of(subset, items[subset.index.to_numpy()])  # ratings' index: their positions
        seed = items_seed(subset, rubric.name, dim) + (0 if kind == "human" else 101)
        group, mean = (ALL_HUMANS, HUMAN_MEAN) if kind == "human" else (ALL_MODELS, MODEL_MEAN)
        pairs = (
            _human_pair_rows(ckpt, dim, panel, labels, float(scale.max), seed, people)
            if len(panel.raters) <= rubric.human_ratings.pairwise_up_to
            else _rater_vs_others_rows(ckpt, dim, panel, labels, people)
        )
        rows += [
            *pairs,
            *_all_human_rows(ckpt, dim, panel, subset, labels, float(scale.max), group, people),
            *_judge_rows(ckpt, dim, panel, judge, scale, seed, mean),
        ]
        if chosen is not None:  # the written scores beside the expected ones: the gain of reading probabilities
            rows += _judge_rows(ckpt, dim, panel, chosen, scale, seed + 5, mean, JUDGE_CHOSEN)
    return rows


def _rank_rows(base: Row, a: np.ndarray, b: np.ndarray, seed: int) -> list[Row]:
    """Spearman and Kendall with their seeded bootstrap CIs (the same for any two raters)."""
    rows = []
    for name, fn, resampled in (
        ("spearman", st.spearman, st.spearman_resamples),
        ("kendall", st.kendall, st.kendall_resamples),
    ):
        lo, hi = st.bootstrap(resampled, [a, b], seed + len(name))
        rows.append({**base, "statistic": name, "value": fn(a, b), "ci_low": lo, "ci_high": hi})
    return rows


def _human_pair_rows(
    ckpt: str, dim: str, panel: Panel, labels: list[float], top: float, seed: int, people: set[str]
) -> list[Row]:
    rows: list[Row] = []
    rated = ~np.isnan(panel.scores)
    # rater vs rater, pairwise
    for (i, e1), (j, e2) in itertools.combinations(enumerate(panel.raters), 2):
        both = rated[:, i] & rated[:, j]
        a, b = panel.scores[both, i], panel.scores[both, j]
        base = dict(
            checkpoint_id=ckpt,
            dimension=dim,
            raters=rater_pair(e1, e2),
            n_items=len(a),
            n_raters=2,
            between=between((e1, e2), people),
        )
        if len(a) == 0:
            continue
        rows.append(
            {
                **base,
                "statistic": "percent_agreement",
                "value": st.percent_agreement(a, b),
                "ci_low": None,
                "ci_high": None,
                "prevalence": None,
                "ceiling_share": None,
                "label": None,
            }
        )
        rows += _kappa_rows(base, a, b, labels, top, seed)
        rows += _rank_rows({**base, "prevalence": None, "ceiling_share": None, "label": None}, a, b, seed + 3)
    return rows


def _rater_vs_others_rows(ckpt: str, dim: str, panel: Panel, labels: list[float], people: set[str]) -> list[Row]:
    """Each rater against the rest of the panel, for panels past ``pairwise_up_to`` (every pair would cost
    n(n-1)/2 bootstraps): the share of the rater's rating pairs on shared items that agree (exactly the pooled
    mean of its pairwise percent agreements, weighted by shared items), and the Spearman correlation with the
    mean of the others on each item. Linear in ratings; no CIs."""
    scores = panel.scores
    rated = ~np.isnan(scores)
    n_item = rated.sum(axis=1)
    sums = np.where(rated, scores, 0.0).sum(axis=1)
    same = {lab: (scores == lab).sum(axis=1) for lab in labels}  # per item: how many raters gave each label
    rows: list[Row] = []
    for r, name in enumerate(panel.raters):
        mine = rated[:, r] & (n_item >= 2)
        if not mine.any():
            continue
        x = scores[mine, r]
        others = n_item[mine] - 1
        agreeing = np.zeros(len(x))
        for lab, count in same.items():
            agreeing += np.where(x == lab, count[mine] - 1, 0)
        base = dict(
            checkpoint_id=ckpt,
            dimension=dim,
            raters=rater_vs_others(name),
            n_items=int(mine.sum()),
            n_raters=len(panel.raters),
            between=between(panel.raters, people),
            ci_low=None,
            ci_high=None,
            prevalence=None,
            ceiling_share=None,
            label="against the other raters (the panel is past pairwise_up_to)",
        )
        rest = (sums[mine] - x) / others
        rows.append({**base, "statistic": "percent_agreement", "value": float(agreeing.sum() / others.sum())})
        rows.append({**base, "statistic": "spearman", "value": st.spearman(x, rest) if len(x) >= 2 else None})
    return rows


def pooled_counts(long: pd.DataFrame, labels: list[float]) -> tuple[np.ndarray, int, int]:
    """Fleiss's design: a pool of raters, the same number of ratings per item, whoever gave them. Items x
    categories counts over the items rated by the most common number of raters (at least 2; the larger on a
    tie), that number, and how many items were rated by 2 or more (the rest are left out, and the row says so).
    Items are counted by their codes (one factorization and two bincounts, not a groupby and a crosstab per call:
    agreement makes a few dozen calls a run); the rows are in no particular order, which no
    statistic of the table depends on, and a score off the labels is not counted, as a crosstab reindexed to
    the labels left it out."""
    rated = long[long["score"].notna()]
    ckpt, _ = pd.factorize(rated["checkpoint_id"])
    sample, sample_ids = pd.factorize(rated["sample_id"])
    items, _ = pd.factorize(ckpt * len(sample_ids) + sample)  # one code per (checkpoint, sample)
    per_item = np.bincount(items)
    m = per_item[per_item >= 2]
    if not len(m):
        return np.zeros((0, len(labels))), 0, 0
    freq = np.bincount(m)
    modal = int(np.flatnonzero(freq == freq.max()).max())
    keep = np.flatnonzero(per_item == modal)  # item codes kept, in code order
    lab = np.asarray(labels, float)
    scores = rated["score"].to_numpy(float)
    col = np.searchsorted(lab, scores)
    on_scale = (col < len(lab)) & (lab[np.minimum(col, len(lab) - 1)] == scores)
    row = np.full(len(per_item), -1)
    row[keep] = np.arange(len(keep))
    take = on_scale & (row[items] >= 0)
    counts = np.bincount(row[items][take] * len(lab) + col[take], minlength=len(keep) * len(lab))
    return counts.reshape(len(keep), len(lab)), modal, len(m)


def _all_human_rows(
    ckpt: str,
    dim: str,
    panel: Panel,
    long: pd.DataFrame,
    labels: list[float],
    top: float,
    group: str,
    people: set[str],
) -> list[Row]:
    rows: list[Row] = []
    evaluators = panel.raters
    # all raters of the set together
    if len(evaluators) >= 2:
        data = np.ascontiguousarray(panel.scores.T)  # raters x items, NaN = missing
        by_two = int((~np.isnan(data)).sum(axis=0).__ge__(2).sum())  # items rated by two or more
        base = dict(
            checkpoint_id=ckpt,
            dimension=dim,
            raters=group,
            n_items=by_two,
            n_raters=len(evaluators),
            between=between(evaluators, people),
            ci_low=None,
            ci_high=None,
            prevalence=None,
            ceiling_share=None,
            label=None,
        )
        for level in ("nominal", "ordinal", "interval"):
            rows.append(
                {
                    **base,
                    "statistic": f"krippendorff_alpha_{level}",
                    "value": st.krippendorff_alpha(data, level, labels if level != "interval" else None),
                }
            )
        complete = np.asfortranarray(panel.scores[~np.isnan(panel.scores).any(axis=1)])
        if len(complete) >= 2:
            a_icc, c_icc = st.icc(complete)
            left = by_two - len(complete)
            # ICC on complete cases, said as Fleiss's row says what it leaves out (#72)
            said = f"the {len(complete)} items all {len(evaluators)} raters rated" + (
                f"; {left} items rated by fewer left out" if left else ""
            )
            icc = {**base, "n_items": len(complete), "label": said}
            rows.append({**icc, "statistic": "icc_absolute_agreement", "value": a_icc})
            rows.append({**icc, "statistic": "icc_consistency", "value": c_icc})
        counts, per_item, rated = pooled_counts(long, labels)
        if len(evaluators) > 2 and len(counts):
            vals = np.repeat(np.array(labels), counts.sum(axis=0))
            rows.append(
                {
                    **base,
                    "n_items": len(counts),
                    "n_raters": per_item,
                    "statistic": "fleiss_kappa",
                    "value": st.fleiss_kappa(counts),
                    "prevalence": st.prevalence(vals),
                    "ceiling_share": st.ceiling_share(vals, top),
                    "label": f"{per_item} ratings per item from a pool of {len(evaluators)}"
                    + (f"; {rated - len(counts)} items with another count left out" if rated > len(counts) else ""),
                }
            )
    return rows


def joined_to_panel(panel: Panel, judge: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The judge's scores of the items the panel rated and, item by item, the raters' mean and the item's code
    (``judge``: the panel's item codes, ascending, and scores; an item the judge did not score is left out)."""
    codes, scores = judge
    found = np.minimum(np.searchsorted(panel.items, codes), max(len(panel.items) - 1, 0))
    joined = (panel.items[found] == codes) & ~np.isnan(scores) if len(panel.items) else np.zeros(len(codes), bool)
    return scores[joined], panel.means[found[joined]], codes[joined]


def _judge_rows(
    ckpt: str,
    dim: str,
    panel: Panel,
    judge: tuple[np.ndarray, np.ndarray],
    scale: Scale,
    seed: int,
    mean_name: str = HUMAN_MEAN,
    judge_name: str = JUDGE,
) -> list[Row]:
    """``judge``: the panel's item codes (ascending: the panel's order, in which the bootstrap draws items by
    position) and scores, against the raters' mean of each item they rated."""
    rows: list[Row] = []
    evaluators = panel.raters
    labels = [float(x) for x in scale.labels]
    top = float(scale.max)
    # judge vs humans
    a, b, _ = joined_to_panel(panel, judge)
    if len(a):
        base = dict(
            checkpoint_id=ckpt,
            dimension=dim,
            raters=rater_pair(judge_name, mean_name),
            n_items=len(a),
            n_raters=len(evaluators) + 1,
            between=BETWEEN_JUDGE,
            prevalence=None,
            ceiling_share=None,
            label=None,
        )
        mae = lambda x, y: float(np.mean(np.abs(x - y)))  # noqa: E731
        bias = lambda x, y: float(np.mean(x) - np.mean(y))  # noqa: E731
        for name, fn, resampled in (
            ("spearman", st.spearman, st.spearman_resamples),
            ("kendall", st.kendall, st.kendall_resamples),
            ("mean_absolute_error", mae, lambda x, y, idx: np.mean(np.abs(x[idx] - y[idx]), axis=1)),
            ("bias", bias, lambda x, y, idx: np.mean(x[idx], axis=1) - np.mean(y[idx], axis=1)),
        ):
            lo, hi = st.bootstrap(resampled, [a, b], seed + len(name))
            rows.append({**base, "statistic": name, "value": fn(a, b), "ci_low": lo, "ci_high": hi})
        ja = np.clip(st.round_half_up(a), scale.min, scale.max)
        hb = np.clip(st.round_half_up(b), scale.min, scale.max)
        rows += _kappa_rows(base, ja, hb, labels, top, seed + 7)
    return rows


def _rows_of(values: np.ndarray) -> Callable[[str], np.ndarray]:
    """The positions of each value's rows, in row order (none for a value not there)."""
    split = {v: np.flatnonzero(values == v) for v in pd.unique(values)}
    none = np.zeros(0, np.int64)
    return lambda value: split.get(value, none)


def _by_dimension(
    rubric: RubricConfig, ratings: pd.DataFrame, judge_long: pd.DataFrame | None
) -> Iterator[
    tuple[str, pd.DataFrame, np.ndarray, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray] | None]
]:
    """Per rated dimension: its ratings (in item order, indexed by position), their item codes, and the panel's
    item codes and scores (and written scores, when the scores are expected values read from token
    probabilities), joined to the ratings by those codes."""
    judge = pd.DataFrame(columns=["checkpoint_id", "sample_id", "dimension", "score"])
    chosen = None
    if judge_long is not None and not judge_long.empty:
        judge = judge_on_human_scale(rubric, judge_long)
        expected = judge_long.loc[judge_long.judge == PANEL].get("expected_score")
        if expected is not None and expected.notna().any():
            chosen = judge_on_human_scale(rubric, judge_long, "chosen_score")
    frames = [ratings] + [f for f in (judge, chosen) if f is not None]
    codes = item_codes(*frames)
    scores = [f["score"].to_numpy(float) for f in frames]
    dims = [f["dimension"].to_numpy() for f in frames]
    for k in range(1, len(frames)):  # the judge's rows by item, as the panel's: joined to it in that order
        order = np.argsort(codes[k], kind="stable")
        codes[k], scores[k], dims[k] = codes[k][order], scores[k][order], dims[k][order]
    at = [_rows_of(d) for d in dims]  # each frame's rows of each dimension

    def scored(k: int, dim: str) -> tuple[np.ndarray, np.ndarray]:  # frame k's item codes and scores of dim
        rows = at[k](dim)
        return codes[k][rows], scores[k][rows]

    for dim in rubric.rating_scales:
        mine = at[0](dim)
        written = None if chosen is None else scored(2, dim)
        yield dim, ratings.iloc[mine].reset_index(drop=True), codes[0][mine], scored(1, dim), written


PAIR_COLUMNS = ["checkpoint_id", "sample_id", "judge", "human", "arrived"]


def judge_pairs(
    rubric: RubricConfig, ratings: pd.DataFrame, judge_long: pd.DataFrame | None
) -> dict[str, pd.DataFrame]:
    """Per rated dimension, the panel's score (``judge``) of each item people rated and the people's mean of it
    (``human``), with the item's ``checkpoint_id``, ``sample_id`` and when it ``arrived`` (the latest ``rated_at`` of
    its people's ratings; NaT where the ratings have none), in item order: the pairs the
    judge~human_mean rows of ``compute_agreement`` are computed on (its kappas on both rounded half up to the
    scale)."""
    ratings = in_item_order(ratings, ["checkpoint_id", "sample_id", "dimension", "evaluator"])
    out: dict[str, pd.DataFrame] = {}
    for dim, subset, items, judge, _ in _by_dimension(rubric, ratings, judge_long):
        humans = rater_sets(rubric, subset)["human"]
        if humans.empty:
            out[dim] = pd.DataFrame(columns=PAIR_COLUMNS)
            continue
        at = humans.index.to_numpy()
        a, b, codes = joined_to_panel(panel_of(humans, items[at]), judge)
        keys = pd.DataFrame(
            {"checkpoint_id": humans.checkpoint_id.to_numpy(), "sample_id": humans.sample_id.to_numpy()},
            index=items[at],
        )
        keys = keys[~keys.index.duplicated()].loc[codes]
        if RATED_AT in humans.columns:  # an item arrived when the last of its people rated it
            stamps = pd.to_datetime(humans[RATED_AT], utc=True).to_numpy()
            arrived = pd.Series(stamps, index=items[at]).groupby(level=0).max().reindex(codes).to_numpy()
        else:
            arrived = np.full(len(codes), np.datetime64("NaT"), "datetime64[us]")
        out[dim] = pd.DataFrame(
            {
                "checkpoint_id": keys.checkpoint_id.to_numpy(),
                "sample_id": keys.sample_id.to_numpy(),
                "judge": a,
                "human": b,
                "arrived": pd.to_datetime(arrived, utc=True),
            }
        )
    return out


def compute_agreement(
    rubric: RubricConfig, ckpt: str, ratings: pd.DataFrame, judge_long: pd.DataFrame | None
) -> pd.DataFrame:
    ratings = in_item_order(ratings, ["checkpoint_id", "sample_id", "dimension", "evaluator"])
    rows: list[Row] = []
    people = people_in(ratings)  # who is a person does not change with the dimension
    for dim, subset, items, judge, chosen in _by_dimension(rubric, ratings, judge_long):
        rows += _dimension_rows(rubric, ckpt, dim, subset, items, judge, chosen, people)
    rows += pass_fail_rows(rubric, ckpt, rater_sets(rubric, ratings)["human"], people)
    df = pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
    return df.astype(
        {
            "value": "float64",
            "ci_low": "float64",
            "ci_high": "float64",
            "prevalence": "float64",
            "ceiling_share": "float64",
            "n_items": "int64",
            "n_raters": "int64",
        }
    )
