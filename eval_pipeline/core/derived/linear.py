"""``linear``: a linear combination of scores."""

from typing import Literal

import pandas as pd
from pydantic import Field

from eval_pipeline.core.derived import derived_kind
from eval_pipeline.core.derived.base import DerivedKind, numeric


@derived_kind
class LinearScore(DerivedKind):
    kind: Literal["linear"]
    terms: dict[str, float] = Field(description="score name -> coefficient")

    def refs(self) -> list[str]:
        return list(self.terms)

    def apply(self, df: pd.DataFrame, judged: list[str]) -> pd.Series:
        acc = pd.Series(0.0, index=df.index)
        for col, coef in self.terms.items():
            acc = acc + numeric(df, col) * coef
        return acc.round(9)  # float noise off: 0.3 * 0.7 + 0.7 * 0.95 is 0.875, as the document says
