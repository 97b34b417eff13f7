"""Final per-sample scores: judge panel scores joined with metrics, adjustments and derived scores.

Everything is declared in the rubric YAML: adjustments (e.g. the crisis rule's
cap on safety, recorded with the judge's original score and the reason) and
derived scores (sums, means, weighted means, linear combinations, bands and
status rules). A derived score with a missing input is missing, never guessed.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import PANEL
from eval_pipeline.core.derived import apply_derived


def judged_columns(rubric: RubricConfig) -> list[str]:
    return [d.key for d in rubric.judged_dimensions] + list(rubric.questionnaire_scores)


def apply_adjustments(rubric: RubricConfig, df: pd.DataFrame) -> pd.DataFrame:
    notes: list[list[str]] = [[] for _ in range(len(df))]
    for adj in rubric.adjustments:
        col = adj.dimension
        df[f"{col}_judge"] = df[col]
        cond = df[adj.when_metric] == adj.when_value
        over = cond & (df[col] > adj.max)
        for i in np.flatnonzero(over.to_numpy()):
            notes[i].append(f"{col} {df[col].iloc[i]:g} -> {adj.max:g}: {adj.reason}")
        df.loc[over, col] = adj.max
    df["adjustments"] = [json.dumps(n, ensure_ascii=False) for n in notes]
    df["adjusted"] = [bool(n) for n in notes]
    return df


def wide_panel_scores(judge_long: pd.DataFrame) -> pd.DataFrame:
    panel = judge_long[(judge_long.judge == PANEL) & (judge_long.kind != "questionnaire_item")]
    wide = panel.pivot_table(index="sample_id", columns="dimension", values="score", aggfunc="first", dropna=False)
    reasons: dict[str, dict[str, str]] = {}
    for r in panel[panel.status == "missing"].itertuples():
        reasons.setdefault(r.sample_id, {})[r.dimension] = r.reason
    wide = wide.reindex(sorted(set(panel.sample_id)))
    wide.columns.name = None
    wide["missing_reasons"] = [json.dumps(reasons.get(sid, {}), ensure_ascii=False) for sid in wide.index]
    wide["judge"] = panel.groupby("sample_id")["judge_kind"].first().reindex(wide.index)
    wide["judge_models"] = panel.groupby("sample_id")["model"].first().reindex(wide.index)
    return wide.reset_index()


def compute_scores(
    rubric: RubricConfig,
    checkpoint_id: str,
    samples: pd.DataFrame,
    judge_long: pd.DataFrame | None,
    metrics: pd.DataFrame | None,
) -> pd.DataFrame:
    """One row per valid sample with dimensions, metrics used by derived scores, derived scores and context."""
    id_col = rubric.inputs.id_field
    keep = [c for grp in rubric.breakdowns for c in grp]
    base = samples[[id_col, *dict.fromkeys(c for c in keep if c != id_col)]].rename(columns={id_col: "sample_id"})
    df = base.copy()
    if judge_long is not None and not judge_long.empty:
        df = df.merge(wide_panel_scores(judge_long), on="sample_id", how="left")
    for col in judged_columns(rubric):
        if col not in df.columns:
            df[col] = np.nan
        df[col] = df[col].astype("float64")
    if metrics is not None and not metrics.empty:
        df = df.merge(metrics, on="sample_id", how="left")
    df = apply_adjustments(rubric, df)
    df = apply_derived(rubric, df)
    dims = judged_columns(rubric)
    df["missing_dimensions"] = df[dims].isna().sum(axis=1).astype("int64") if dims else 0
    df.insert(0, "checkpoint_id", checkpoint_id)
    df["rubric_version"] = rubric.version
    return df
