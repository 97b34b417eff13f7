"""``mean``: the mean of scores, missing when any is missing."""

from typing import Literal

import pandas as pd

from eval_pipeline.core.derived import derived_kind
from eval_pipeline.core.derived.base import DerivedKind, expand_all, frame


@derived_kind
class MeanScore(DerivedKind):
    kind: Literal["mean"]
    of: list[str]

    def refs(self) -> list[str]:
        return [r for r in self.of if r != "all"]

    def apply(self, df: pd.DataFrame, judged: list[str]) -> pd.Series:
        vals = frame(df, expand_all(self.of, judged))
        return vals.mean(axis=1).where(vals.notna().all(axis=1)).round(9)
