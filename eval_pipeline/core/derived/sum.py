"""``sum``: the sum of scores (all present, or missing), divided by ``divide_by``."""

from typing import Literal

import pandas as pd
from pydantic import Field

from eval_pipeline.core.derived import derived_kind
from eval_pipeline.core.derived.base import DerivedKind, expand_all, frame


@derived_kind
class SumScore(DerivedKind):
    kind: Literal["sum"]
    of: list[str] = Field(description="Dimension keys (or 'all').")
    divide_by: float = 1.0

    def refs(self) -> list[str]:
        return [r for r in self.of if r != "all"]

    def apply(self, df: pd.DataFrame, judged: list[str]) -> pd.Series:
        cols = expand_all(self.of, judged)
        return (frame(df, cols).sum(axis=1, min_count=len(cols)) / self.divide_by).round(9)
