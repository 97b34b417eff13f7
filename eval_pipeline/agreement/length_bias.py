"""Length bias: does the judge lean on how long an answer is, more than the people who rated the same answers?

LLM judges favour longer answers. Per judged dimension (and the headline), on one checkpoint:

* ``judge_length_rho``: Spearman's rho of the judge's score with the response's length in words, over every
  scored sample, with a seeded bootstrap CI;
* on the human-rated samples, the same rho for the judge and for the human mean, and their gap
  (judge minus humans) with a paired bootstrap CI (the same resampled items for both);
  ``flagged`` when the whole CI of the gap is above zero: the judge rewards length beyond what people do;
* a length-controlled mean, as AlpacaEval's length-controlled win rate does for preferences: the score is
  regressed on log length (least squares over the checkpoint's samples), and the length term is set to a
  reference length, the parent checkpoint's mean log length (the checkpoint's own when it has no parent).
  So the length-controlled change against the parent is the change with the length change taken out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from eval_pipeline.agreement import stats as st
from eval_pipeline.core.contracts import LENGTH_BIAS_COLUMNS
from eval_pipeline.core.resampling import in_item_order, seed_of
from eval_pipeline.core.types import Row


def log_words(texts: pd.Series) -> pd.Series:
    """log(1 + words): length effects are multiplicative (a 50-word answer is not 'short' next to a 5-word one)."""
    words = np.fromiter((len(t.split()) for t in texts.fillna("").astype(str)), float, len(texts))
    return pd.Series(np.log1p(words), index=texts.index)  # (pandas' .str.split().str.len() built lists: 6x slower)


def length_bias(
    checkpoint_id: str,
    scores: pd.DataFrame,
    lengths: pd.Series,
    human_means: dict[str, pd.Series],
    names: list[str],
    reference_log_words: float | None,
) -> pd.DataFrame:
    """``scores``: one row per sample (``sample_id`` and the score columns); ``lengths``: log words by sample id;
    ``human_means``: per rated dimension, the human mean by sample id; ``reference_log_words``: the parent's mean
    log length (None: no parent, the checkpoint's own)."""
    by_id = in_item_order(scores, ["sample_id"]).set_index("sample_id")
    length = lengths.reindex(by_id.index)
    rows: dict[str, Row] = {}
    # scores present on the same samples: their common lengths, and each score's values
    groups: dict[bytes, tuple[np.ndarray, list[tuple[str, np.ndarray]]]] = {}
    for name in names:
        if name not in by_id.columns:
            continue
        s = pd.to_numeric(by_id[name], errors="coerce")
        ok = (s.notna() & length.notna()).to_numpy()
        y, x = s[ok].to_numpy(float), length[ok].to_numpy(float)
        row: Row = dict(checkpoint_id=checkpoint_id, score=name, n=int(ok.sum()))
        row["judge_length_rho"] = st.spearman(y, x)
        row.update(_controlled(y, x, reference_log_words))
        row.update(_against_humans(s, length, human_means.get(name), seed_of(checkpoint_id, name)))
        rows[name] = row
        groups.setdefault(ok.tobytes(), (x, []))[1].append((name, y))
    for x, members in groups.values():
        # one set of resamples per group (100k samples: one draw instead of one per score), seeded by the
        # checkpoint; a score alone on its samples keeps the seed it has always had. Spearman needs only the
        # levels, found once per group (lengths) and per score, not per block of resamples
        alone = len(members) == 1
        seed = seed_of(checkpoint_id, members[0][0]) if alone else seed_of(checkpoint_id, "length_bias")
        x_codes = st.rank_codes(x)
        stats = [(st.spearman_resamples, [st.rank_codes(y), x_codes]) for _, y in members]
        for (name, _), ci in zip(members, st.bootstrap_many(stats, seed), strict=True):
            rows[name]["judge_ci_low"], rows[name]["judge_ci_high"] = ci
    return pd.DataFrame(list(rows.values()), columns=LENGTH_BIAS_COLUMNS).astype(
        {c: "float64" for c in LENGTH_BIAS_COLUMNS if c not in ("checkpoint_id", "score", "n", "n_rated", "flagged")}
    )


def _controlled(y: np.ndarray, x: np.ndarray, reference: float | None) -> Row:
    mean = float(np.mean(y)) if len(y) else float("nan")
    own = float(np.mean(x)) if len(x) else float("nan")
    ref = own if reference is None or not np.isfinite(reference) else float(reference)
    flat_x = len(x) == 0 or float(np.ptp(x)) <= 1e-9 * max(1.0, float(np.abs(x).max()))
    flat_y = len(y) == 0 or float(np.ptp(y)) == 0.0
    if len(y) < 3 or flat_x or flat_y:
        # no length variation (a std of 4e-16 is rounding, not variation) or no score variation: nothing to
        # learn a slope from, nothing to take out; the controlled mean is the mean
        slope = 0.0
    else:
        slope = float(np.polyfit(x, y, 1)[0])
    return dict(
        mean=mean,
        slope_per_log_word=slope,
        mean_log_words=own,
        reference_log_words=ref,
        length_controlled_mean=mean - slope * (own - ref),
    )


def _against_humans(s: pd.Series, length: pd.Series, human: pd.Series | None, seed: int) -> Row:
    out: Row = dict(
        n_rated=0,
        rated_judge_length_rho=None,
        human_length_rho=None,
        rho_gap=None,
        gap_ci_low=None,
        gap_ci_high=None,
        flagged=False,
    )
    if human is None:
        return out
    both = pd.concat([s.rename("j"), human.rename("h"), length.rename("l")], axis=1, join="inner").dropna()
    if len(both) < 3:
        out["n_rated"] = len(both)
        return out
    j, h, ln = (both[c].to_numpy(float) for c in ("j", "h", "l"))
    gap = lambda a, b, c, idx: st.spearman_resamples(a, c, idx) - st.spearman_resamples(b, c, idx)  # noqa: E731
    lo, hi = st.bootstrap(gap, [j, h, ln], seed + 1)
    rj, rh = st.spearman(j, ln), st.spearman(h, ln)
    out.update(
        n_rated=len(both),
        rated_judge_length_rho=rj,
        human_length_rho=rh,
        rho_gap=rj - rh,
        gap_ci_low=lo,
        gap_ci_high=hi,
        flagged=bool(lo == lo and lo > 0),
    )
    return out
