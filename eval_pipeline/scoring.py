"""Final per-sample scores: judge panel scores joined with metrics, adjustments and derived scores.

Everything is declared in the rubric YAML: adjustments (e.g. the crisis rule's
cap on safety, recorded with the judge's original score and the reason) and
derived scores (sums, means, weighted means, linear combinations, bands and
status rules). A derived score with a missing input is missing, never guessed.
"""

from __future__ import annotations

import json
import operator
from typing import Any

import numpy as np
import pandas as pd

from eval_pipeline.config import (
    BandScore,
    LinearScore,
    MeanScore,
    MetricScore,
    RubricConfig,
    RulesScore,
    SumScore,
    WeightedMeanScore,
)

OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq, "!=": operator.ne}


def judged_columns(rubric: RubricConfig) -> list[str]:
    return [d.key for d in rubric.judged_dimensions] + list(rubric.questionnaire_scores)


def _refs(rubric: RubricConfig, of: list[str]) -> list[str]:
    return [d.key for d in rubric.judged_dimensions] if of == ["all"] else of


def _numeric(df: pd.DataFrame, col: str) -> pd.Series:
    """A column as floats; an absent input (e.g. a metric when scoring human ratings) is missing."""
    if col not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype="float64")
    return pd.to_numeric(df[col], errors="coerce").astype("float64")


def _frame(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: _numeric(df, c) for c in cols}, index=df.index)


def apply_derived(rubric: RubricConfig, df: pd.DataFrame) -> pd.DataFrame:
    for s in rubric.derived:
        if isinstance(s, SumScore):
            cols = _refs(rubric, s.of)
            df[s.name] = (_frame(df, cols).sum(axis=1, min_count=len(cols)) / s.divide_by).round(9)
        elif isinstance(s, MeanScore):
            cols = _refs(rubric, s.of)
            vals = _frame(df, cols)
            df[s.name] = vals.mean(axis=1).where(vals.notna().all(axis=1)).round(9)
        elif isinstance(s, WeightedMeanScore):
            total = sum(s.weights.values())
            acc = pd.Series(0.0, index=df.index)
            for col, w in s.weights.items():
                acc = acc + _numeric(df, col) / s.normalise_by * w
            df[s.name] = (acc / total).round(9)
        elif isinstance(s, LinearScore):
            acc = pd.Series(0.0, index=df.index)
            for col, coef in s.terms.items():
                acc = acc + _numeric(df, col) * coef
            df[s.name] = acc.round(9)  # float noise off: 0.3 * 0.7 + 0.7 * 0.95 is 0.875, as the document says
        elif isinstance(s, BandScore):
            vals = _numeric(df, s.of)
            labels: list[Any] = []
            for v in vals:
                if np.isnan(v):
                    labels.append(None)
                    continue
                # compare on the rounded value so 0.7 from 14/20 is not lost to float error
                rv = round(float(v), 9)
                labels.append(next((b.label for b in s.bands if b.min is None or rv >= b.min), None))
            df[s.name] = pd.Series(labels, index=df.index, dtype="object")
        elif isinstance(s, RulesScore):
            out: list[Any] = []
            for _, row in df.iterrows():
                status = None
                for rule in s.rules:
                    vals = [row.get(c.score) for c in rule.all]
                    if any(v is None or (isinstance(v, float) and np.isnan(v)) for v in vals):
                        status = None
                        break
                    if all(OPS[c.op](round(float(v), 9) if not isinstance(c.value, str) else v, c.value)
                           for c, v in zip(rule.all, vals)):
                        status = rule.status
                        break
                out.append(status)
            df[s.name] = pd.Series(out, index=df.index, dtype="object")
        elif isinstance(s, MetricScore):
            df[s.name] = df[s.metric] if s.metric in df.columns else np.nan
    return df


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
    panel = judge_long[(judge_long.judge == "panel") & (judge_long.kind != "questionnaire_item")]
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
