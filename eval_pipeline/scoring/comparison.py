"""Checkpoint vs parent: per-score change with a seeded paired bootstrap CI over the samples both share.

The parent is the one `checkpoint.json` names, else the previous checkpoint by creation time. Every score's
change is tested (a paired t-test, two-sided), the p-values of a rubric's scores corrected together (Holm), and
a score whose corrected p-value is below ALPHA with the change on the worse side *and* larger than the score's
practical margin (``practical_margins``: the regression gate's per-score margins, else a share of its rating
scale's range, never less than the judge's own repeat noise) is a regression, whatever the score; a significant
drop within the margin is said as such in the note, never a regression. Beside it, the smallest change the
shared samples could detect (MDE, power 0.8). Two checkpoints judged by different judges (judge.identity) are
never compared: the rows say ``not_comparable`` and why.

Where people rated samples of both checkpoints, each judged dimension also gets a human-calibrated row
(``<dimension>_calibrated``): the PPI++ estimate of how the people's mean moved (agreement.ppi.ppi_change), on the
people's scale, tested in the same Holm family. A judge that cannot see a drop (saturated, or untrusted on that
dimension) does not hide one the people's ratings show.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd

from eval_pipeline.agreement.ppi import people_mean, ppi_change
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import CHECKPOINTS, COMPARISON_COLUMNS
from eval_pipeline.core.distributions import t_test_p
from eval_pipeline.core.resampling import in_item_order, mean_intervals
from eval_pipeline.core.types import Row
from eval_pipeline.scoring.gates.base import GateResult, RegressionParams, RegressionSpec, fails_closed, pending
from eval_pipeline.scoring.summary import numeric_scores
from eval_pipeline.storage.warehouse import Warehouse

N_BOOT = 2000
ALPHA = 0.05
MDE_Z = 1.959963984540054 + 0.8416212335729143  # z(1 - alpha/2) + z(power 0.8)
COMPARED, NOT_COMPARABLE = "compared", "not_comparable"
CALIBRATED_SUFFIX = "_calibrated"
DTYPES = {
    "checkpoint_id": "object",
    "parent_id": "object",
    "score": "object",
    "n_pairs": "int64",
    "parent_mean": "float64",
    "mean": "float64",
    "delta": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "share_better": "float64",
    "share_worse": "float64",
    "lower_is_better": "bool",
    "guarded": "bool",
    "regression": "bool",
    "judge_noise_95": "float64",
    "beyond_judge_noise": "boolean",
    "p_value": "float64",
    "p_holm": "float64",
    "mde": "float64",
    "status": "object",
    "note": "object",
}


def paired_test(d: np.ndarray) -> tuple[float, float]:
    """(two-sided p-value of a paired t-test that the mean change is 0, minimum detectable effect) over the
    changes ``d``. Fewer than 2 changes: NaN, NaN. All changes equal: p 1 when they are 0, else 0; MDE 0."""
    n = len(d)
    if n < 2:
        return math.nan, math.nan
    sd = float(np.std(d, ddof=1))
    if sd == 0.0 or sd < 1e-12 * max(1.0, float(np.abs(d).max())):
        return (1.0 if float(np.abs(d).max()) == 0.0 else 0.0), 0.0
    p = t_test_p(d)
    return p, MDE_Z * sd / math.sqrt(n)


def holm(p: list[float]) -> list[float]:
    """Holm's step-down correction of ``p`` (NaN stays NaN and is not counted)."""
    valid = sorted((v, i) for i, v in enumerate(p) if v == v)
    m = len(valid)
    out = [math.nan] * len(p)
    running = 0.0
    for rank, (v, i) in enumerate(valid):
        running = max(running, min(1.0, (m - rank) * v))
        out[i] = running
    return out


def empty_comparison() -> pd.DataFrame:
    return pd.DataFrame(columns=COMPARISON_COLUMNS).astype(DTYPES)


def find_parent(checkpoints: pd.DataFrame, checkpoint_id: str) -> str | None:
    row = checkpoints[checkpoints.checkpoint_id == checkpoint_id]
    if row.empty:
        return None
    parent = row.parent.iloc[0]
    if isinstance(parent, str) and parent:
        return None if parent == checkpoint_id else parent  # never compared with itself
    earlier = checkpoints[checkpoints.created_at < row.created_at.iloc[0]].sort_values(["created_at", "checkpoint_id"])
    return None if earlier.empty else str(earlier.checkpoint_id.iloc[-1])


def parent_of(wh: Warehouse, checkpoint_id: str) -> str | None:
    """The checkpoint's parent as every stage reads it (comparison, gates, length bias, the viewer): the one its
    manifest names, else the one created just before it."""
    if not wh.table_exists(*CHECKPOINTS):
        return None
    return find_parent(wh.read(*CHECKPOINTS), checkpoint_id)


def not_comparable(rubric: RubricConfig, checkpoint_id: str, parent_id: str, note: str) -> pd.DataFrame:
    """One row per score saying why no change is computed (the two checkpoints were judged by different judges)."""
    rows = [
        dict(
            checkpoint_id=checkpoint_id,
            parent_id=parent_id,
            score=col,
            n_pairs=0,
            lower_is_better=col in rubric.lower_is_better,
            guarded=col in rubric.guarded_dimensions,
            regression=False,
            status=NOT_COMPARABLE,
            note=note,
        )
        for col in numeric_scores(rubric)
    ]
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS).astype(DTYPES)


def practical_margins(rubric: RubricConfig, parent: pd.DataFrame | None = None) -> dict[str, float]:
    """The smallest drop of each score that counts as a regression, from the rubric's regression gate (its
    defaults without one): ``margins[score]`` as given, else ``margin_share`` of the range of the scale the
    score is on (judged dimensions and their ``_calibrated`` rows, questionnaire metrics (sums of items) and
    totals, means of dimensions), else (a metric, on no scale of the rubric's) ``margin_share`` of the range
    the parent's samples span on it (``parent``: its scores, one column per score)."""
    from eval_pipeline.core.derived.mean import MeanScore
    from eval_pipeline.core.derived.weighted_mean import WeightedMeanScore

    spec = next((g for g in rubric.gates if g.kind == "regression"), None)
    params = RegressionParams.model_validate(spec.params) if spec is not None else RegressionParams()
    share = params.margin_share
    out: dict[str, float] = {}
    for d in rubric.judged_dimensions:
        sc = rubric.scale_of(d)
        out[d.key] = out[f"{d.key}{CALIBRATED_SUFFIX}"] = share * float(sc.max - sc.min)
    q = rubric.questionnaire
    if q is not None:
        item = float(q.scale.max - q.scale.min)
        for m in q.metrics:
            out[m.key] = share * item * len(m.items)
            out[f"{m.key}{CALIBRATED_SUFFIX}"] = share * item
        for name in rubric.questionnaire_scores:
            out.setdefault(name, share * item * sum(len(m.items) for m in q.metrics))
    for s in rubric.derived:
        if isinstance(s, (MeanScore, WeightedMeanScore)):
            out[s.name] = share * float(rubric.scale.max - rubric.scale.min)
    for col in numeric_scores(rubric):
        if parent is not None and col not in out and col in parent.columns:
            values = pd.to_numeric(parent[col], errors="coerce").dropna()
            out[col] = share * float(values.max() - values.min()) if len(values) else 0.0
    out.update({k: float(v) for k, v in params.margins.items()})
    return out


def compare(
    rubric: RubricConfig,
    checkpoint_id: str,
    parent_id: str,
    child: pd.DataFrame,
    parent: pd.DataFrame,
    judge_noise_sd: dict[str, float] | None = None,
    calibrated: list[Row] | None = None,
    untrusted: set[str] | None = None,
) -> pd.DataFrame:
    """Per score: the paired change against the parent with its bootstrap CI. ``judge_noise_sd`` (the judge's
    within-sample SD per dimension, from judge_repeatability): beside each change, the 95 % band that repeat noise
    alone gives a mean change over the shared samples, and whether the change is beyond it. ``calibrated``: the
    human-calibrated rows (calibrated_rows), tested in the same Holm family. ``untrusted``: the dimensions whose
    judge the pooled calibration set does not trust (agreement.trust): their judged change is tested and shown
    but is no evidence of a regression (the note points to the calibrated row, which is)."""
    from eval_pipeline.judge.repeat import noise_band

    rows: list[Row] = []
    merged = in_item_order(child, ["sample_id"]).merge(parent, on="sample_id", suffixes=("", "__parent"))
    cols = [c for c in numeric_scores(rubric) if c in child.columns and c in parent.columns]
    pairs = {
        c: (pd.to_numeric(merged[c], errors="coerce"), pd.to_numeric(merged[f"{c}__parent"], errors="coerce"))
        for c in cols
    }
    # the scores present on the same shared samples share one set of resamples (a score alone keeps its own seed)
    intervals = mean_intervals(
        {c: (a - b).to_numpy(dtype=float) for c, (a, b) in pairs.items()},
        (rubric.name, checkpoint_id, parent_id),
        N_BOOT,
        min_n=2,
    )
    for col, (a, b) in pairs.items():
        ok = a.notna() & b.notna()
        d = (a[ok] - b[ok]).to_numpy(dtype=float)
        low = col in rubric.lower_is_better
        lo, hi = intervals[col]
        worse = (d > 0) if low else (d < 0)
        better = (d < 0) if low else (d > 0)
        guarded = col in rubric.guarded_dimensions
        p, mde = paired_test(d)
        sd = (judge_noise_sd or {}).get(col)
        band = noise_band(sd, len(d), len(d)) if sd is not None else float("nan")
        rows.append(
            dict(
                checkpoint_id=checkpoint_id,
                parent_id=parent_id,
                score=col,
                n_pairs=int(len(d)),
                parent_mean=float(b[ok].mean()) if len(d) else None,
                mean=float(a[ok].mean()) if len(d) else None,
                delta=float(d.mean()) if len(d) else None,
                ci_low=lo,
                ci_high=hi,
                share_better=float(better.mean()) if len(d) else None,
                share_worse=float(worse.mean()) if len(d) else None,
                lower_is_better=low,
                guarded=guarded,
                regression=False,
                judge_noise_95=band,
                beyond_judge_noise=None if band != band or not len(d) else bool(abs(float(d.mean())) > band),
                p_value=p,
                mde=mde,
                status=COMPARED,
                note=None,
            )
        )
    rows.extend(calibrated or [])
    _decide_regressions(rows, practical_margins(rubric, parent), untrusted or set())
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS).astype(DTYPES)


def _decide_regressions(rows: list[Row], margins: dict[str, float], untrusted: set[str]) -> None:
    """Each row's Holm-adjusted p (``p_holm``) over the family, and whether it is a regression: a significant drop,
    by a trusted judge, past the score's practical margin (or the judge's noise band); otherwise a note says why
    not."""
    for row, adjusted in zip(rows, holm([r["p_value"] for r in rows])):
        row["p_holm"] = adjusted
        worse = row["delta"] is not None and ((row["delta"] > 0) if row["lower_is_better"] else (row["delta"] < 0))
        significant = bool(worse and adjusted == adjusted and adjusted < ALPHA)
        if significant and row["score"] in untrusted:
            row["note"] = (
                f"a significant drop by a judge not trusted on {row['score']}: not counted as a regression "
                f"(see {row['score']}{CALIBRATED_SUFFIX} where people rated both checkpoints)"
            )
            significant = False
        margin = max(margins.get(row["score"], 0.0), _finite(row.get("judge_noise_95")))
        if significant and abs(row["delta"]) < margin:
            within = f"changed, below the margin of {margin:.3g}"
            row["note"] = f"{within}: significant but too small to count as a regression" + (
                f"; {row['note']}" if row["note"] else ""
            )
            significant = False
        row["regression"] = significant


def _finite(x: object) -> float:
    try:
        v = float(x) if isinstance(x, (numbers.Real, str)) else math.nan
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) else 0.0


def calibrated_rows(
    rubric: RubricConfig,
    checkpoint_id: str,
    parent_id: str,
    judge: pd.DataFrame,
    humans: pd.DataFrame,
) -> list[Row]:
    """Per judged dimension people rated in both checkpoints: the PPI++ change of the people's mean (one row,
    score ``<dimension>_calibrated``). ``judge``: (checkpoint_id, sample_id, dimension, score) of the panel on the
    people's scale, both checkpoints; ``humans``: the people's ratings of both (checkpoint_id, sample_id,
    dimension, score). A dimension without at least 2 rated samples on each side has no row."""
    rows: list[Row] = []
    if judge.empty or humans.empty:
        return rows
    f_by = judge.dropna(subset=["score"]).groupby(["checkpoint_id", "dimension", "sample_id"]).score.mean()
    y_by = humans.dropna(subset=["score"]).groupby(["checkpoint_id", "dimension", "sample_id"]).score.mean()
    empty = pd.Series(dtype=float)

    def side(series: pd.Series, ckpt: str, dim: str) -> pd.Series:
        try:
            return series.loc[(ckpt, dim)]
        except KeyError:
            return empty

    for dim in sorted(set(rubric.rating_scales) & set(judge.dimension.unique())):
        f_c, f_p = side(f_by, checkpoint_id, dim), side(f_by, parent_id, dim)
        y_c, y_p = side(y_by, checkpoint_id, dim), side(y_by, parent_id, dim)
        ch = ppi_change(f_c, y_c, f_p, y_p, ALPHA)
        if ch.reason:
            continue
        base, _ = people_mean(f_p, y_p)  # the parent's calibrated mean, from which the change is counted
        low = dim in rubric.lower_is_better
        how = f"paired over {ch.n_rated} samples rated in both" if ch.paired else f"unpaired, {ch.n_rated}+ rated"
        rows.append(
            dict(
                checkpoint_id=checkpoint_id,
                parent_id=parent_id,
                score=f"{dim}{CALIBRATED_SUFFIX}",
                n_pairs=ch.n_shared,
                parent_mean=base,
                mean=base + ch.delta,
                delta=ch.delta,
                ci_low=ch.ci_low,
                ci_high=ch.ci_high,
                share_better=None,
                share_worse=None,
                lower_is_better=low,
                guarded=dim in rubric.guarded_dimensions,
                regression=False,
                judge_noise_95=None,
                beyond_judge_noise=None,
                p_value=ch.p_value,
                mde=ch.mde,
                status=COMPARED,
                note=f"human-calibrated change (PPI++, {how}; the parent's mean is its PPI++ estimate)",
            )
        )
    return rows


def evaluate_regression(
    g: RegressionSpec,
    comparison: pd.DataFrame | None,
    parent_id: str | None,
    note: str | None,
    label: str = "",
) -> GateResult:
    """Fails when a score the gate covers (every score but ``params.ignore``) dropped significantly (Holm-corrected
    p < ALPHA); pending when the parent was judged by another judge or has no scores yet; not applicable (passed,
    with the reason) for a checkpoint without a parent. ``label`` names what ``parent_id`` is to the reader
    ("baseline "); the parent comparison leaves it empty."""
    if parent_id is None:
        return GateResult(g.name, g.kind, 0.0, g.threshold, True, 0, "not applicable: no parent checkpoint to compare")
    if comparison is None or comparison.empty:
        return pending(g, 0, f"no comparison with parent {parent_id} yet ({note or 'parent not evaluated'})")
    status = comparison["status"] if "status" in comparison.columns else pd.Series(COMPARED, index=comparison.index)
    if (status == NOT_COMPARABLE).any():
        return pending(g, 0, str(comparison.loc[status == NOT_COMPARABLE, "note"].iloc[0]))
    ignore = set(g.params.ignore)
    covered = comparison[~comparison.score.isin(ignore)]
    n = int(covered.n_pairs.min()) if len(covered) else 0
    if n < g.min_samples:
        return fails_closed(g, n, f"{n} samples shared with {label}{parent_id}, fewer than {g.min_samples}")
    flagged = covered[covered.regression.astype(str).str.lower().isin(["true", "1"])]
    parts = [
        f"{r.score} {r.delta:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
        + (f" p_holm {r.p_holm:.2g}" if "p_holm" in covered.columns and r.p_holm == r.p_holm else "")
        for r in flagged.itertuples()
    ]
    if len(flagged):
        return GateResult(
            g.name,
            g.kind,
            float(len(flagged)),
            g.threshold,
            False,
            n,
            f"regression vs {label}{parent_id} on {', '.join(flagged.score)}: " + "; ".join(parts),
        )
    return GateResult(
        g.name,
        g.kind,
        0.0,
        g.threshold,
        True,
        n,
        f"no score dropped significantly vs {label}{parent_id} (Holm, {len(covered)} tested)",
    )
