"""``band``: a label from the first band whose minimum the score reaches."""

from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from eval_pipeline.core.derived import derived_kind
from eval_pipeline.core.derived.base import DerivedKind, numeric
from eval_pipeline.core.strict import Strict


class Band(Strict):
    label: str
    min: float | None = None


@derived_kind
class BandScore(DerivedKind):
    kind: Literal["band"]
    of: str
    bands: list[Band] = Field(
        description="Checked in order; the first whose min the value reaches wins; a band without min catches the rest."
    )

    def refs(self) -> list[str]:
        return [self.of]

    def apply(self, df: pd.DataFrame, judged: list[str]) -> pd.Series:
        labels: list[Any] = []
        for v in numeric(df, self.of):
            if np.isnan(v):
                labels.append(None)
                continue
            rv = round(float(v), 9)  # compare on the rounded value so 0.7 from 14/20 is not lost to float error
            labels.append(next((b.label for b in self.bands if b.min is None or rv >= b.min), None))
        return pd.Series(labels, index=df.index, dtype="object")
