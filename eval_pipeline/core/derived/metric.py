"""``metric``: a column of the metrics table taken as a score."""

from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field

from eval_pipeline.core.derived import derived_kind
from eval_pipeline.core.derived.base import DerivedKind


@derived_kind
class MetricScore(DerivedKind):
    kind: Literal["metric"]
    metric: str = Field(description="Column of the metrics table.")

    def refs(self) -> list[str]:
        return []  # a metric column, checked against the metric registry when the rubric loads

    def apply(self, df: pd.DataFrame, judged: list[str]) -> pd.Series:
        if self.metric in df.columns:
            return df[self.metric]
        return pd.Series(np.nan, index=df.index, dtype="float64")
