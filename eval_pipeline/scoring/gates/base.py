"""What every gate kind shares: its typed spec, its result, and what it reads besides the scores."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field

from eval_pipeline.core.config.gates import GateParams
from eval_pipeline.core.strict import Strict

DEFAULT_MARGIN_SHARE = 0.05  # of a rating scale's range: 0.2 on a 1-5 scale, one sample in five a point lower


class RegressionParams(GateParams):
    ignore: list[str] = Field(default_factory=list, description="Scores the regression gate does not gate on.")
    margin_share: float = Field(
        DEFAULT_MARGIN_SHARE,
        ge=0,
        lt=1,
        description="Practical margin of a score on a rating scale (a dimension, its calibrated change, a "
        "questionnaire metric, a mean of dimensions), as a share of the scale's range: a significant drop smaller "
        "than it is a change, not a regression.",
    )
    margins: dict[str, float] = Field(
        default_factory=dict,
        description="Practical margin per score, on the score's own units (overrides margin_share); a metric with "
        "no margin here regresses on significance alone.",
    )


class GateSpec(Strict):
    """A gate's fields as its kind needs them. A kind subclasses this to make fields required
    (e.g. ``score: str``); the rubric's gate is validated against it when the rubric loads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: str
    dimensions: list[str] | None = None
    score: str | None = None
    values: list[str] | None = None
    threshold: float
    min_samples: int = Field(1, ge=1)
    params: GateParams = Field(default_factory=GateParams)
    description: str = ""


class RegressionSpec(GateSpec):
    params: RegressionParams = Field(default_factory=RegressionParams)


PASSED, FAILED, PENDING = "passed", "failed", "pending"


@dataclass
class GateResult:
    """A gate's outcome. ``status`` is ``passed``, ``failed`` or ``pending``: pending is "not enough data yet"
    (too few human ratings for the judge's calibration set, a parent judged by another judge): neither a pass nor
    a failure of the model; it does not change the exit code unless the gate's ``params.pending_fails`` is true.
    Given only ``passed``, the status follows it."""

    gate: str
    kind: str
    value: float | None
    threshold: float
    passed: bool
    n: int
    reason: str
    status: str = ""

    def __post_init__(self) -> None:
        if not self.status:
            self.status = PASSED if self.passed else FAILED
        if self.status == PENDING:
            self.passed = False


def pending(g: GateSpec, n: int, reason: str, value: float | None = None, name: str | None = None) -> GateResult:
    """``g`` (or its part ``name``) waiting for data: neither a pass nor a failure."""
    return GateResult(name or g.name, g.kind, value, g.threshold, False, n, f"pending: {reason}", PENDING)


def fails_closed(g: GateSpec, n: int, reason: str) -> GateResult:
    """``g`` failed for want of data it cannot wait for (no value, ``n`` samples), saying why."""
    return GateResult(g.name, g.kind, None, g.threshold, False, n, f"fails closed: {reason}")


@dataclass
class GateInputs:
    """What gates read besides the scores: other tables of this checkpoint, each loaded on first use.

    ``load(table)`` returns this checkpoint's rows of ``<rubric>.<table>``, or None when the table does
    not exist; a gate that needs a table it cannot get fails closed and says so."""

    load: Callable[[str], pd.DataFrame | None] = lambda _table: None
    parent: str | None = None  # the checkpoint's parent, when lineage_known
    lineage_known: bool = False
    checkpoint: str | None = None  # the checkpoint the gates are evaluated for
    # another checkpoint's rows of a table (a kind that names the checkpoints it reads: GateKind.checkpoints)
    load_of: Callable[[str, str], pd.DataFrame | None] = lambda _table, _checkpoint: None
    _tables: dict[str, pd.DataFrame | None] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame | None:
        if name not in self._tables:
            self._tables[name] = self.load(name)
        return self._tables[name]

    def other(self, name: str, checkpoint: str) -> pd.DataFrame | None:
        """``checkpoint``'s rows of ``<rubric>.<name>``, None when the table does not exist."""
        return self.load_of(name, checkpoint)


def values_of(scores: pd.DataFrame, col: str) -> np.ndarray:
    """A score column as floats, missing values dropped (they shrink n, never pass)."""
    if col not in scores.columns:
        return np.array([], dtype=float)
    v = pd.to_numeric(scores[col], errors="coerce").to_numpy(dtype=float)
    return np.asarray(v[~np.isnan(v)])


def too_few(g: GateSpec, n: int, what: str, rows: int | None = None) -> GateResult:
    """Fewer than ``min_samples`` values: the gate fails closed (missing scores count as missing), unless the
    checkpoint has enough samples (``rows``) and *none* has a value: nothing was scored (an endpoint that never
    answered, a wrong OPENAI_BASE_URL), which is data not there yet, not a failure of the model: pending; the
    verdict's completeness says why."""
    if rows is not None and n == 0 and rows >= g.min_samples:
        return pending(
            g,
            n,
            f"none of the {rows} samples has a score yet (every one missing: see judge_scores.reason); evaluate "
            "again once they are scored",
        )
    return fails_closed(g, n, f"{n} {what}, fewer than the {g.min_samples} required")
