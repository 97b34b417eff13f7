"""Per-checkpoint summaries: n, mean, standard deviation, a seeded 95 % bootstrap CI and pass rate,
per score, overall and by the breakdowns the rubric declares; shares for status scores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from eval_pipeline.core.config import BandScore, RubricConfig, RulesScore
from eval_pipeline.core.contracts import SUMMARY_COLUMNS
from eval_pipeline.core.resampling import in_item_order, mean_intervals
from eval_pipeline.scoring.scores import judged_columns

N_BOOT = 2000


def numeric_scores(rubric: RubricConfig) -> list[str]:
    out = list(judged_columns(rubric))
    for s in rubric.derived:
        if not isinstance(s, (BandScore, RulesScore)):
            out.append(s.name)
    return list(dict.fromkeys(out))


def categorical_scores(rubric: RubricConfig) -> list[str]:
    return [s.name for s in rubric.derived if isinstance(s, (BandScore, RulesScore))]


def _pass_thresholds(rubric: RubricConfig) -> dict[str, float]:
    out = {d.key: float(d.pass_threshold) for d in rubric.dimensions if d.pass_threshold is not None}
    for g in rubric.gates:
        if g.kind == "dimension_mean":
            for k in g.dimensions or [d.key for d in rubric.judged_dimensions]:
                out.setdefault(k, g.threshold)
    return out


# long by design: one row shape for every (breakdown, group, score), built in one loop so the bootstrap seeds follow one
# order
def summarise(rubric: RubricConfig, checkpoint_id: str, scores: pd.DataFrame) -> pd.DataFrame:
    rows = []
    scores = in_item_order(scores, ["sample_id"])
    thresholds = _pass_thresholds(rubric)
    groupings: list[tuple[str, list[str]]] = [("all", [])] + [("|".join(g), g) for g in rubric.breakdowns]
    num = [c for c in numeric_scores(rubric) if c in scores.columns]
    cat = [c for c in categorical_scores(rubric) if c in scores.columns]
    for label, cols in groupings:
        groups = (
            [("all", scores)]
            if not cols
            else [
                ("|".join(str(v) for v in (key if isinstance(key, tuple) else (key,))), g)
                for key, g in scores.groupby(cols, dropna=False, sort=True)
            ]
        )
        for gval, g in groups:
            values: dict[Any, np.ndarray] = {c: pd.to_numeric(g[c], errors="coerce").to_numpy(dtype=float) for c in num}
            levels = {c: sorted(g[c].dropna().unique()) for c in cat}
            for c in cat:  # a status's share of each level: 1 / 0 on the samples that have one, NaN elsewhere
                known = g[c].notna().to_numpy()
                for lv in levels[c]:
                    values[(c, lv)] = np.where(known, (g[c] == lv).to_numpy(dtype=float), np.nan)
            joint = mean_intervals(values, (rubric.name, checkpoint_id, label, gval), N_BOOT)
            for col in num:
                vals = values[col]
                ok = vals[~np.isnan(vals)]
                lo, hi = joint[col]
                thr = thresholds.get(col)
                rows.append(
                    dict(
                        checkpoint_id=checkpoint_id,
                        breakdown=label,
                        group_value=gval,
                        score=col,
                        headline=col == rubric.headline,
                        n=int(len(ok)),
                        missing=int(len(vals) - len(ok)),
                        mean=float(ok.mean()) if len(ok) else None,
                        std=float(ok.std(ddof=1)) if len(ok) > 1 else None,
                        ci_low=lo if len(ok) else None,
                        ci_high=hi if len(ok) else None,
                        pass_threshold=thr,
                        pass_rate=float((ok >= thr).mean()) if thr is not None and len(ok) else None,
                    )
                )
            for col in cat:
                vals = g[col]
                known = vals.dropna()
                for level in levels[col]:
                    share = values[(col, level)][~np.isnan(values[(col, level)])]
                    lo, hi = joint[(col, level)]
                    rows.append(
                        dict(
                            checkpoint_id=checkpoint_id,
                            breakdown=label,
                            group_value=gval,
                            score=f"{col}={level}",
                            headline=False,
                            n=int(len(known)),
                            missing=int(vals.isna().sum()),
                            mean=float(share.mean()),
                            std=None,
                            ci_low=lo,
                            ci_high=hi,
                            pass_threshold=None,
                            pass_rate=None,
                        )
                    )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS).astype(
        {
            "mean": "float64",
            "std": "float64",
            "ci_low": "float64",
            "ci_high": "float64",
            "pass_threshold": "float64",
            "pass_rate": "float64",
        }
    )


def headline(rubric: RubricConfig, summary: pd.DataFrame) -> float | None:
    row = summary[(summary.breakdown == "all") & (summary.score == rubric.headline)]
    return None if row.empty or pd.isna(row["mean"].iloc[0]) else float(row["mean"].iloc[0])
