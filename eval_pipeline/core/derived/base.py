"""What every derived-score kind is: a named score computed per sample from other scores."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd

from eval_pipeline.core.strict import Strict


class DerivedKind(Strict):
    """A derived score kind. Subclasses declare ``kind: Literal["..."]``, their fields, the scores they
    read (:meth:`refs`) and how they compute (:meth:`apply`); a score with a missing input is missing."""

    kind_name: ClassVar[str]
    name: str

    def refs(self) -> list[str]:
        """The scores this one reads ('all' stands for every judged dimension and is not a reference)."""
        raise NotImplementedError

    def apply(self, df: pd.DataFrame, judged: list[str]) -> pd.Series:
        """The score for every row of ``df`` (``judged``: the rubric's judged dimension keys)."""
        raise NotImplementedError


def expand_all(of: list[str], judged: list[str]) -> list[str]:
    return judged if of == ["all"] else of


def numeric(df: pd.DataFrame, col: str) -> pd.Series:
    """A column as floats; an absent input (e.g. a metric when scoring human ratings) is missing."""
    if col not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype="float64")
    return pd.to_numeric(df[col], errors="coerce").astype("float64")


def frame(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: numeric(df, c) for c in cols}, index=df.index)
