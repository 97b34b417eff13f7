"""``rules``: a status from the first rule whose conditions all hold; missing when a rule reads a missing score."""

import operator
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from eval_pipeline.core.derived import derived_kind
from eval_pipeline.core.derived.base import DerivedKind
from eval_pipeline.core.strict import Strict
from eval_pipeline.core.types import Row

OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq, "!=": operator.ne}


class Condition(Strict):
    score: str
    op: Literal[">=", ">", "<=", "<", "==", "!="]
    value: float | str


class StatusRule(Strict):
    status: str
    all: list[Condition] = Field(default_factory=list)


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


@derived_kind
class RulesScore(DerivedKind):
    kind: Literal["rules"]
    rules: list[StatusRule] = Field(description="First matching rule wins; a rule without conditions is the default.")

    def refs(self) -> list[str]:
        return [c.score for r in self.rules for c in r.all]

    def _status(self, row: Row) -> str | None:
        for rule in self.rules:
            vals: list[Any] = [row.get(c.score) for c in rule.all]
            if any(_missing(v) for v in vals):
                return None
            if all(
                OPS[c.op](v if isinstance(c.value, str) else round(float(v), 9), c.value)
                for c, v in zip(rule.all, vals)
            ):
                return rule.status
        return None

    def apply(self, df: pd.DataFrame, judged: list[str]) -> pd.Series:
        out = [self._status(row) for row in df.to_dict("records")]
        return pd.Series(out, index=df.index, dtype="object")
