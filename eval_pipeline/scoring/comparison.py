"""Checkpoint vs parent: per-score change with a seeded paired bootstrap CI over the samples both share.

The parent is the one `checkpoint.json` names, else the previous checkpoint by creation time. A
regression is a guarded score whose 95 % interval of the change lies wholly on the worse side
(below zero, or above zero for scores where lower is better).
"""

from __future__ import annotations

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import CHECKPOINTS, COMPARISON_COLUMNS
from eval_pipeline.core.resampling import in_item_order, mean_intervals
from eval_pipeline.storage.warehouse import Warehouse
from eval_pipeline.scoring.gates.base import GateResult, GateSpec
from eval_pipeline.scoring.summary import numeric_scores

N_BOOT = 2000
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
}


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
    return find_parent(wh.query_df(f"SELECT * FROM {CHECKPOINTS[0]}.{CHECKPOINTS[1]}"), checkpoint_id)


def compare(
    rubric: RubricConfig,
    checkpoint_id: str,
    parent_id: str,
    child: pd.DataFrame,
    parent: pd.DataFrame,
    judge_noise_sd: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Per score: the paired change against the parent with its bootstrap CI. ``judge_noise_sd`` (the judge's
    within-sample SD per dimension, from judge_repeatability): beside each change, the 95 % band that repeat noise
    alone gives a mean change over the shared samples, and whether the change is beyond it."""
    from eval_pipeline.judge.repeat import noise_band

    rows = []
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
        regression = bool(guarded and len(d) >= 2 and ((lo > 0) if low else (hi < 0)))
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
                regression=regression,
                judge_noise_95=band,
                beyond_judge_noise=None if band != band or not len(d) else bool(abs(float(d.mean())) > band),
            )
        )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS).astype(DTYPES)


def evaluate_regression(
    g: GateSpec, comparison: pd.DataFrame | None, parent_id: str | None, note: str | None
) -> GateResult:
    if parent_id is None:
        return GateResult(g.name, g.kind, None, g.threshold, True, 0, "no parent checkpoint: nothing to regress from")
    if comparison is None or comparison.empty:
        return GateResult(
            g.name,
            g.kind,
            None,
            g.threshold,
            False,
            0,
            f"fails closed: no comparison with parent {parent_id} ({note or 'parent not evaluated'})",
        )
    guarded = comparison[comparison.guarded.astype(str).str.lower().isin(["true", "1"])]
    n = int(guarded.n_pairs.min()) if len(guarded) else 0
    if n < g.min_samples:
        return GateResult(
            g.name,
            g.kind,
            None,
            g.threshold,
            False,
            n,
            f"fails closed: {n} samples shared with {parent_id}, fewer than {g.min_samples}",
        )
    reg = guarded[guarded.regression.astype(str).str.lower().isin(["true", "1"])]
    parts = [f"{r.score} {r.delta:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]" for r in guarded.itertuples()]
    if len(reg):
        return GateResult(
            g.name,
            g.kind,
            float(len(reg)),
            g.threshold,
            False,
            n,
            f"regression vs {parent_id} on {', '.join(reg.score)}; " + "; ".join(parts),
        )
    return GateResult(
        g.name, g.kind, 0.0, g.threshold, True, n, f"no guarded score regressed vs {parent_id}; " + "; ".join(parts)
    )
