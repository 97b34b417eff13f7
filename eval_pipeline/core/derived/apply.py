"""Derived scores applied to a frame of scores: a rubric's own (``apply_derived``) and each rater's
(``per_rater``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pandas as pd

from eval_pipeline.core.derived.base import DerivedKind


class _Keyed(Protocol):
    @property
    def key(self) -> str: ...


class DeclaresScores(Protocol):
    """What derived scores need of a rubric: its judged dimensions and its derived scores (``RubricConfig`` is
    one; named by what it has, since the rubric's config imports this module)."""

    @property
    def judged_dimensions(self) -> Sequence[_Keyed]: ...

    @property
    def derived(self) -> Sequence[DerivedKind]: ...


def apply_derived(rubric: DeclaresScores, df: pd.DataFrame) -> pd.DataFrame:
    """Add every derived score the rubric declares to ``df``, in declaration order."""
    judged = [d.key for d in rubric.judged_dimensions]
    for s in rubric.derived:
        df[s.name] = s.apply(df, judged)
    return df


def per_rater(rubric: DeclaresScores, ratings: pd.DataFrame, score: str, items: list[str]) -> pd.DataFrame:
    """One score (a rated dimension or a score derived from them) of each rater: items x evaluators, from
    long ratings (one row per item, evaluator and dimension). Dimensions nobody rated count as missing."""
    wide = ratings.pivot_table(
        index=[*items, "evaluator"], columns="dimension", values="score", aggfunc="first"
    ).reset_index()
    wide.columns.name = None
    for d in rubric.judged_dimensions:
        if d.key not in wide.columns:
            wide[d.key] = float("nan")
    wide = apply_derived(rubric, wide)
    return wide.pivot_table(index=items, columns="evaluator", values=score, aggfunc="first")
