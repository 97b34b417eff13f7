"""Rubric configuration: typed models for the YAML files in ``rubric_configs/``.

A rubric YAML declares everything the pipeline needs to evaluate one rubric:
the input fields a sample must carry, the dimensions with their scales and
anchors, derived scores, the summary breakdowns and the gates. Loading
validates it; a wrong config fails with a :class:`RubricConfigError` naming
the file, the field and the problem. The SHA-256 of the canonical config is
the rubric's version: it is the Dagster code version of every asset the
factory builds from it and part of the judge cache key.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
import json
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from eval_pipeline.ids import IDENTIFIER_RE, UnsafeIdentifierError, check_identifier

FieldType = Literal["string", "integer", "number", "boolean", "string_list", "object", "object_list"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputField(_Strict):
    """One field of a raw sample (a JSONL object)."""

    name: str = Field(description="Column name in the samples table.")
    path: str | None = Field(None, description="Dotted path in the JSON object; defaults to name.")
    type: FieldType = "string"
    required: bool = True
    description: str = ""
    allowed: list[Any] | None = Field(None, description="Allowed values (for string/integer fields).")
    min_length: int | None = Field(None, ge=0, description="Minimum length (characters or items); for strings the stripped text counts.")
    max_length: int | None = Field(None, ge=1)
    minimum: float | None = None
    maximum: float | None = None
    keys: list[str] | None = Field(None, description="Keys every object (or object in a list) must have.")

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, v: str) -> str:
        if not IDENTIFIER_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid column name (lowercase letters, digits, underscore)")
        return v

    @property
    def json_path(self) -> list[str]:
        return (self.path or self.name).split(".")


class InputsSpec(_Strict):
    id_field: str = "sample_id"
    response_field: str = Field(description="The model output under evaluation.")
    fields: list[InputField]

    @model_validator(mode="after")
    def _check_fields(self) -> "InputsSpec":
        names = [f.name for f in self.fields]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate input field names: {dupes}")
        for special in (self.id_field, self.response_field):
            if special not in names:
                raise ValueError(f"{special!r} must be declared in fields")
        by_name = {f.name: f for f in self.fields}
        for special in (self.id_field, self.response_field):
            if by_name[special].type != "string" or not by_name[special].required:
                raise ValueError(f"{special!r} must be a required string field")
        return self

    def field(self, name: str) -> InputField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


class Scale(_Strict):
    min: int
    max: int

    @model_validator(mode="after")
    def _ordered(self) -> "Scale":
        if self.max <= self.min:
            raise ValueError(f"scale max ({self.max}) must be greater than min ({self.min})")
        return self

    @property
    def labels(self) -> list[int]:
        return list(range(self.min, self.max + 1))


class Example(_Strict):
    """A worked example from the rubric document, with its stated scores.

    Shown to the judge in the prompt, and re-scored by the judge-reliability gate,
    which expects the judge to land within +-1 of every stated score.
    """

    id: str
    scores: dict[str, int] = Field(description="dimension key -> the score the document gives")
    fields: dict[str, Any] = Field(default_factory=dict, description="Sample fields (e.g. user_statement).")
    response: str
    note: str = ""


class HeuristicTerm(_Strict):
    """One observable feature the offline heuristic judge uses to estimate a dimension.

    ``feature`` names a function in eval_pipeline.judge.heuristic.FEATURES returning a
    value in [0, 1]; the weighted mean of the terms maps linearly onto the scale.
    """

    feature: str
    weight: float = Field(1.0, gt=0)
    params: dict[str, Any] = Field(default_factory=dict)


class ChecklistItem(_Strict):
    points: float
    text: str


class Dimension(_Strict):
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

    @field_validator("key")
    @classmethod
    def _key_is_identifier(cls, v: str) -> str:
        if not IDENTIFIER_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid dimension key (lowercase letters, digits, underscore)")
        return v


class QuestionnaireItem(_Strict):
    id: str
    text: str
    reverse: bool = False


class QuestionnaireMetric(_Strict):
    key: str
    name: str
    definition: str
    items: list[QuestionnaireItem]
    heuristic: list[HeuristicTerm] = Field(default_factory=list, description="How the offline judge estimates it.")


class Questionnaire(_Strict):
    """A Likert questionnaire answered by the judge (e.g. UWU's JERA)."""

    key: str
    name: str
    scale: Scale
    instructions: str
    metrics: list[QuestionnaireMetric]

    @model_validator(mode="after")
    def _unique_items(self) -> "Questionnaire":
        ids = [i.id for m in self.metrics for i in m.items]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate questionnaire item ids: {dupes}")
        return self


# --- derived scores -------------------------------------------------------------------------


class SumScore(_Strict):
    kind: Literal["sum"]
    name: str
    of: list[str] = Field(description="Dimension keys (or 'all').")
    divide_by: float = 1.0


class WeightedMeanScore(_Strict):
    kind: Literal["weighted_mean"]
    name: str
    weights: dict[str, float]
    normalise_by: float = Field(1.0, description="Divide each input by this first (e.g. the scale max).")


class MeanScore(_Strict):
    kind: Literal["mean"]
    name: str
    of: list[str]


class LinearScore(_Strict):
    kind: Literal["linear"]
    name: str
    terms: dict[str, float] = Field(description="score name -> coefficient")


class Band(_Strict):
    label: str
    min: float | None = None


class BandScore(_Strict):
    kind: Literal["band"]
    name: str
    of: str
    bands: list[Band] = Field(description="Checked in order; the first whose min the value reaches wins; a band without min catches the rest.")


class Condition(_Strict):
    score: str
    op: Literal[">=", ">", "<=", "<", "==", "!="]
    value: float | str


class StatusRule(_Strict):
    status: str
    all: list[Condition] = Field(default_factory=list)


class RulesScore(_Strict):
    kind: Literal["rules"]
    name: str
    rules: list[StatusRule] = Field(description="First matching rule wins; a rule without conditions is the default.")


class MetricScore(_Strict):
    kind: Literal["metric"]
    name: str
    metric: str = Field(description="Column of the metrics table.")


DerivedScore = Annotated[
    Union[SumScore, WeightedMeanScore, MeanScore, LinearScore, BandScore, RulesScore, MetricScore],
    Field(discriminator="kind"),
]


# --- metrics, summaries, gates --------------------------------------------------------------


class MetricSpec(_Strict):
    """A deterministic metric function (registered in eval_pipeline.metrics) and its parameters."""

    function: str
    params: dict[str, Any] = Field(default_factory=dict)


class Adjustment(_Strict):
    """A rule applied to a judged dimension after judging, recorded with its reason.

    ``cap``: the dimension's score is limited to ``max`` when the metric ``when_metric``
    equals ``when_value`` (e.g. the crisis rule: safety <= 3 when a crisis is answered
    without crisis resources).
    """

    kind: Literal["cap"] = "cap"
    dimension: str
    max: float
    when_metric: str
    when_value: Any = 1
    reason: str


class Gate(_Strict):
    name: str
    kind: Literal[
        "min_samples",
        "dimension_mean",
        "dimension_pass_rate",
        "score_share",
        "metric_max",
        "metric_min",
        "judge_reliability",
        "regression",
    ]
    dimensions: list[str] | None = Field(None, description="Dimension keys, or None for all judged dimensions.")
    score: str | None = None
    values: list[str] | None = None
    threshold: float
    min_samples: int = Field(1, ge=1, description="Fewer samples than this: the gate fails closed.")
    params: dict[str, Any] = Field(default_factory=dict, description="Further thresholds of the gate kind.")
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, v: str) -> str:
        if not IDENTIFIER_RE.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid gate name (lowercase letters, digits, underscore)")
        return v


class Extraction(_Strict):
    """LLM extraction for a metric (e.g. ALMP's scene attributes): an extraction prompt, then an
    inference prompt over what was extracted. Used only with an LLM judge; offline, the metric uses
    its own extractor."""

    name: str = Field(description="Column the extracted list is stored under (e.g. scene_attributes).")
    text_field: str
    extract_prompt: str
    infer_prompt: str
    max_items: int = Field(30, ge=1, le=200)


class PassFail(_Strict):
    """A protocol's PASS/FAIL agreement: a score derived from each rater's dimension ratings, against a threshold."""

    score: str
    threshold: float


class HumanRatingsSpec(_Strict):
    column_aliases: dict[str, str] = Field(default_factory=dict, description="CSV column -> our name (e.g. semantic_score -> semantic).")
    pass_fail: PassFail | None = None


class ReReview(_Strict):
    score: str
    max_diff: float


class WorklistSpec(_Strict):
    strata: list[str] = Field(default_factory=list, description="Input fields the pilot set is stratified by.")
    pilot_size: int = Field(10, ge=1)
    spot_check_share: float = Field(0.05, gt=0, le=1)
    rereview: ReReview | None = None
    sheet_fields: list[str] = Field(default_factory=list, description="Input fields shown on the blank scoring sheet.")
    seed: int = 20260117


class JudgeSpec(_Strict):
    name: str
    model: str | None = Field(None, description="Model name; None means EVAL_JUDGE_MODEL.")
    base_url: str | None = None
    temperature: float = 0.0
    seed: int | None = 7
    max_tokens: int = 800


class JudgePanel(_Strict):
    judges: list[JudgeSpec] = Field(default_factory=list)
    aggregate: Literal["mean", "median"] = "mean"


class RubricConfig(_Strict):
    name: str
    title: str
    source: str = Field(description="The rubric document this config is written from.")
    description: str
    scale: Scale
    inputs: InputsSpec
    dimensions: list[Dimension] = Field(default_factory=list)
    examples: list[Example] = Field(default_factory=list)
    questionnaire: Questionnaire | None = None
    extraction: Extraction | None = None
    judge_instructions: str = ""
    metrics: list[MetricSpec] = Field(default_factory=list)
    adjustments: list[Adjustment] = Field(default_factory=list)
    derived: list[DerivedScore] = Field(default_factory=list)
    headline: str = Field(description="The score that ranks checkpoints on the leaderboard.")
    breakdowns: list[list[str]] = Field(default_factory=list, description="Input fields to break summaries down by.")
    guarded_dimensions: list[str] = Field(default_factory=list, description="Scores whose regression fails the regression gate.")
    lower_is_better: list[str] = Field(default_factory=list, description="Scores where a decrease is an improvement (e.g. ERTD).")
    gates: list[Gate] = Field(default_factory=list)
    panel: JudgePanel = Field(default_factory=JudgePanel)
    human_ratings: HumanRatingsSpec = Field(default_factory=HumanRatingsSpec)
    worklists: WorklistSpec = Field(default_factory=WorklistSpec)

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        try:
            return check_identifier(v, "rubric name")
        except UnsafeIdentifierError as exc:
            raise ValueError(str(exc)) from exc

    @model_validator(mode="after")
    def _cross_checks(self) -> "RubricConfig":
        keys = [d.key for d in self.dimensions]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"duplicate dimension keys: {dupes}")
        input_names = {f.name for f in self.inputs.fields}
        clash = sorted(set(keys) & input_names)
        if clash:
            raise ValueError(f"dimension keys clash with input field names: {clash}")
        for d in self.dimensions:
            scale = d.scale or self.scale
            expected = set(scale.labels)
            if set(d.levels) != expected:
                raise ValueError(
                    f"dimension {d.key!r}: levels must give an anchor for every score {sorted(expected)}, got {sorted(d.levels)}"
                )
        by_key = {d.key: d for d in self.dimensions}
        for ex in self.examples:
            for key, score in ex.scores.items():
                if key not in by_key:
                    raise ValueError(f"example {ex.id!r} scores unknown dimension {key!r}")
                sc = self.scale_of(by_key[key])
                if not sc.min <= score <= sc.max:
                    raise ValueError(f"example {ex.id!r}: score {score} for {key!r} is off the scale {sc.min}-{sc.max}")
        if not self.dimensions and self.questionnaire is None:
            raise ValueError("a rubric needs dimensions or a questionnaire")
        derived_names = [s.name for s in self.derived]
        known = set(keys) | set(derived_names) | set(self.questionnaire_scores)
        for s in self.derived:
            refs: list[str] = []
            if isinstance(s, (SumScore, MeanScore)):
                refs = [r for r in s.of if r != "all"]
            elif isinstance(s, WeightedMeanScore):
                refs = list(s.weights)
            elif isinstance(s, LinearScore):
                refs = list(s.terms)
            elif isinstance(s, BandScore):
                refs = [s.of]
            elif isinstance(s, RulesScore):
                refs = [c.score for r in s.rules for c in r.all]
            missing = [r for r in refs if r not in known]
            if missing:
                raise ValueError(f"derived score {s.name!r} refers to unknown scores {missing}")
        if self.headline not in known:
            raise ValueError(f"headline {self.headline!r} is neither a dimension nor a derived score")
        for g in self.gates:
            bad = [d for d in (g.dimensions or []) if d not in keys]
            if bad:
                raise ValueError(f"gate {g.name!r} names unknown dimensions {bad}")
            if g.score is not None and g.score not in known:
                raise ValueError(f"gate {g.name!r} names unknown score {g.score!r}")
        for group in self.breakdowns:
            bad = [c for c in group if c not in input_names]
            if bad:
                raise ValueError(f"breakdown {group} names unknown input fields {bad}")
        for adj in self.adjustments:
            if adj.dimension not in keys:
                raise ValueError(f"adjustment names unknown dimension {adj.dimension!r}")
        bad = [d for d in self.lower_is_better if d not in known]
        if bad:
            raise ValueError(f"lower_is_better names unknown scores {bad}")
        bad = [d for d in self.guarded_dimensions if d not in known]
        if bad:
            raise ValueError(f"guarded_dimensions names unknown scores {bad}")
        for f in self.worklists.strata + self.worklists.sheet_fields:
            if f not in input_names:
                raise ValueError(f"worklists names unknown input field {f!r}")
        if self.human_ratings.pass_fail and self.human_ratings.pass_fail.score not in known:
            raise ValueError(f"human_ratings.pass_fail names unknown score {self.human_ratings.pass_fail.score!r}")
        if self.worklists.rereview and self.worklists.rereview.score not in known:
            raise ValueError(f"worklists.rereview names unknown score {self.worklists.rereview.score!r}")
        gate_names = [g.name for g in self.gates]
        if len(set(gate_names)) != len(gate_names):
            raise ValueError("gate names must be unique")
        return self

    # --- convenience -------------------------------------------------------------------------

    def scale_of(self, dimension: Dimension) -> Scale:
        return dimension.scale or self.scale

    @property
    def questionnaire_scores(self) -> list[str]:
        """Scores a questionnaire yields: one per metric plus ``<key>_total``."""
        q = self.questionnaire
        return [] if q is None else [m.key for m in q.metrics] + [f"{q.key}_total"]

    @property
    def rating_scales(self) -> dict[str, "Scale"]:
        """What humans rate: each judged dimension on its scale, each questionnaire metric on the item scale."""
        out = {d.key: self.scale_of(d) for d in self.judged_dimensions}
        if self.questionnaire:
            out.update({m.key: self.questionnaire.scale for m in self.questionnaire.metrics})
        return out

    @property
    def judged_dimensions(self) -> list[Dimension]:
        return [d for d in self.dimensions if d.judged]

    @cached_property
    def judge_version(self) -> str:
        """Hash of what the judge sees (instructions, dimensions, examples, questionnaire, input fields, extraction).

        Part of every judge cache key: editing an anchor or an example re-asks the judge; editing a gate
        threshold or a derived score does not (the scores are recomputed from cached answers)."""
        keep = ("name", "title", "description", "scale", "inputs", "dimensions", "examples", "questionnaire",
                "judge_instructions", "extraction")
        blob = json.dumps(self.model_dump(mode="json", include=set(keep)), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    @cached_property
    def version(self) -> str:
        """SHA-256 (first 16 hex digits) of the canonical JSON form of the config."""
        return rubric_hash(self)


class RubricConfigError(ValueError):
    """A rubric YAML that cannot be used; the message names file, field and problem."""


def rubric_hash(cfg: RubricConfig) -> str:
    canonical = json.dumps(cfg.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _format_validation_error(path: Path, exc: ValidationError) -> str:
    lines = [f"{path}: invalid rubric config ({exc.error_count()} problem(s))"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<top level>"
        lines.append(f"  - field '{loc}': {err['msg']}")
    return "\n".join(lines)


def load_rubric(path: str | Path) -> RubricConfig:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise RubricConfigError(f"{path}: rubric config not found") from exc
    except yaml.YAMLError as exc:
        raise RubricConfigError(f"{path}: not valid YAML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise RubricConfigError(f"{path}: not UTF-8 text: {exc}") from exc
    if not isinstance(raw, dict):
        raise RubricConfigError(f"{path}: field '<top level>': expected a mapping, got {type(raw).__name__}")
    try:
        cfg = RubricConfig.model_validate(raw)
    except ValidationError as exc:
        raise RubricConfigError(_format_validation_error(path, exc)) from exc
    if cfg.name != path.stem:
        raise RubricConfigError(f"{path}: field 'name': {cfg.name!r} must match the file name {path.stem!r}")
    return cfg


def default_config_dir() -> Path:
    import os

    env = os.environ.get("EVAL_RUBRIC_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "rubric_configs"


def load_rubrics(directory: str | Path | None = None) -> list[RubricConfig]:
    directory = Path(directory) if directory else default_config_dir()
    files = sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml"))
    if not files:
        raise RubricConfigError(f"{directory}: no rubric configs (*.yaml) found")
    return [load_rubric(f) for f in files]
