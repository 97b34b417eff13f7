"""What is scored: scales, dimensions with their anchors, worked examples, questionnaires."""

from __future__ import annotations

from pydantic import Field, model_validator

from eval_pipeline.core.strict import Strict, identifier_field
from eval_pipeline.core.types import JSONObject, Record


class Scale(Strict):
    min: int
    max: int

    @model_validator(mode="after")
    def _ordered(self) -> Scale:
        if self.max <= self.min:
            raise ValueError(f"scale max ({self.max}) must be greater than min ({self.min})")
        return self

    @property
    def labels(self) -> list[int]:
        return list(range(self.min, self.max + 1))


class Example(Strict):
    """A worked example from the rubric document, with its stated scores.

    Shown to the judge in the prompt, and re-scored by the judge-reliability gate,
    which expects the judge to land within +-1 of every stated score.
    """

    id: str
    scores: dict[str, int] = Field(description="dimension key -> the score the document gives")
    fields: Record = Field(default_factory=dict, description="Sample fields (e.g. user_statement).")
    response: str
    note: str = ""


class HeuristicTerm(Strict):
    """One observable feature the offline heuristic judge uses to estimate a dimension.

    ``feature`` names a function in eval_pipeline.judge.heuristic.FEATURES returning a
    value in [0, 1]; the weighted mean of the terms maps linearly onto the scale.
    """

    feature: str
    weight: float = Field(1.0, gt=0)
    params: JSONObject = Field(default_factory=dict)


class ChecklistItem(Strict):
    points: float
    text: str


class Dimension(Strict):
    key: str
    name: str
    question: str
    scale: Scale | None = None
    judged: bool = True
    levels: dict[int, str] = Field(description="Anchor text for every level of the scale.")
    checklist: list[ChecklistItem] = Field(default_factory=list)
    evaluation_points: list[str] = Field(default_factory=list)
    boundary_guidance: list[str] = Field(default_factory=list)
    weight: float | None = Field(None, ge=0)
    pass_threshold: float | None = None
    holistic: bool = Field(False, description="An overall judgement, not derived from other dimensions.")
    heuristic: list[HeuristicTerm] = Field(default_factory=list, description="How the offline judge estimates it.")

    _key_is_identifier = identifier_field("key", "dimension key")


class QuestionnaireItem(Strict):
    id: str
    text: str
    reverse: bool = False


class QuestionnaireMetric(Strict):
    key: str
    name: str
    definition: str
    items: list[QuestionnaireItem]
    heuristic: list[HeuristicTerm] = Field(default_factory=list, description="How the offline judge estimates it.")


class Questionnaire(Strict):
    """A Likert questionnaire answered by the judge (e.g. UWU's JERA)."""

    key: str
    name: str
    scale: Scale
    instructions: str
    metrics: list[QuestionnaireMetric]

    @model_validator(mode="after")
    def _unique_items(self) -> Questionnaire:
        ids = [i.id for m in self.metrics for i in m.items]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate questionnaire item ids: {dupes}")
        return self
