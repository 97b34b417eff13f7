"""A gate as the rubric YAML declares it; each kind's own fields are checked against the gate registry
(eval_pipeline.scoring.gates) when the rubric loads."""

from __future__ import annotations

from pydantic import Field

from eval_pipeline.core.params import Params
from eval_pipeline.core.strict import Strict, identifier_field
from eval_pipeline.core.types import JSONObject


class GateParams(Params):
    """A gate's ``params``: what every kind takes; a kind that takes more declares a subclass (and a ``GateSpec``
    subclass whose ``params`` is it), so the loader refuses a name the kind never reads."""

    pending_fails: bool = Field(False, description="Count a pending result (not enough data yet) as failed.")


class Gate(Strict):
    name: str
    kind: str = Field(description="A gate kind registered in eval_pipeline.scoring.gates.")
    dimensions: list[str] | None = Field(None, description="Dimension keys, or None for all judged dimensions.")
    score: str | None = None
    values: list[str] | None = None
    threshold: float
    min_samples: int = Field(1, ge=1, description="Fewer samples than this: the gate fails closed.")
    params: JSONObject = Field(default_factory=dict, description="Further thresholds of the gate kind.")
    description: str = ""

    _name_is_identifier = identifier_field("name", "gate name")
