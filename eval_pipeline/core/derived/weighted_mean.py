"""``weighted_mean``: each input divided by ``normalise_by``, weighted, over the sum of the weights."""

from typing import Literal

import pandas as pd
from pydantic import Field

from eval_pipeline.core.derived import derived_kind
from eval_pipeline.core.derived.base import DerivedKind, numeric


@derived_kind
class WeightedMeanScore(DerivedKind):
    kind: Literal["weighted_mean"]
    weights: dict[str, float]
    normalise_by: float = Field(1.0, description="Divide each input by this first (e.g. the scale max).")

    def refs(self) -> list[str]:
        return list(self.weights)

    def apply(self, df: pd.DataFrame, judged: list[str]) -> pd.Series:
        total = sum(self.weights.values())
        acc = pd.Series(0.0, index=df.index)
        for col, w in self.weights.items():
            acc = acc + numeric(df, col) / self.normalise_by * w
        return (acc / total).round(9)
