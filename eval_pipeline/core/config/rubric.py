"""The rubric config: one YAML file, typed, cross-checked, hashed into its versions."""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from eval_pipeline.core import settings
from eval_pipeline.core.config.dimensions import Dimension, Example, Questionnaire, Scale
from eval_pipeline.core.config.gates import Gate
from eval_pipeline.core.config.inputs import InputsSpec
from eval_pipeline.core.config.protocol import (
    Adjustment,
    Extraction,
    HumanRatingsSpec,
    JudgePanel,
    MetricSpec,
    WorklistSpec,
)
from eval_pipeline.core.derived import DerivedScore
from eval_pipeline.core.ids import UnsafeIdentifierError, check_identifier
from eval_pipeline.core.strict import Strict


class RubricConfig(Strict):
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
    guarded_dimensions: list[str] = Field(
        default_factory=list, description="Scores whose regression fails the regression gate."
    )
    lower_is_better: list[str] = Field(
        default_factory=list, description="Scores where a decrease is an improvement (e.g. ERTD)."
    )
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

    # long by design: one pass over every cross-reference of the config, in the order a reader checks them; splitting it
    # scatters the list
    @model_validator(mode="after")
    def _cross_checks(self) -> RubricConfig:
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
                    f"dimension {d.key!r}: levels must give an anchor for every score {sorted(expected)}, got "
                    f"{sorted(d.levels)}"
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
            refs = s.refs()
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
    def rating_scales(self) -> dict[str, Scale]:
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
        keep = (
            "name",
            "title",
            "description",
            "scale",
            "inputs",
            "dimensions",
            "examples",
            "questionnaire",
            "judge_instructions",
            "extraction",
        )
        blob = json.dumps(
            self.model_dump(mode="json", include=set(keep)), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
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
    problems = registry_problems(cfg)
    if problems:
        lines = [f"{path}: invalid rubric config ({len(problems)} problem(s))"]
        lines += [f"  - field '{loc}': {msg}" for loc, msg in problems]
        raise RubricConfigError("\n".join(lines))
    return cfg


def registry_problems(cfg: RubricConfig) -> list[tuple[str, str]]:
    """Names the config takes from the registries (gate kinds and their fields, metric functions), checked
    against them. The registries are looked up here, at load time, not imported by the config models."""
    from eval_pipeline.judge.heuristic import load_features
    from eval_pipeline.metrics import known_metrics
    from eval_pipeline.scoring.gates import spec_problems

    problems: list[tuple[str, str]] = []
    for g in cfg.gates:
        problems += [(f"gates.{g.name}", msg) for msg in spec_problems(g)]
    metrics = set(known_metrics())
    for m in cfg.metrics:
        if m.function not in metrics:
            problems.append(
                (
                    f"metrics.{m.function}",
                    f"unknown metric function {m.function!r} (known: {', '.join(sorted(metrics))})",
                )
            )
    features = load_features()
    holders = [(f"dimensions.{d.key}", d.heuristic) for d in cfg.dimensions]
    if cfg.questionnaire:
        holders += [(f"questionnaire.metrics.{m.key}", m.heuristic) for m in cfg.questionnaire.metrics]
    for where, terms in holders:
        for term in terms:
            if term.feature not in features:
                problems.append((f"{where}.heuristic.{term.feature}", f"unknown heuristic feature {term.feature!r}"))
    return problems


def load_rubrics(directory: str | Path | None = None) -> list[RubricConfig]:
    directory = Path(directory) if directory else settings.rubric_dir()
    files = sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml"))
    if not files:
        raise RubricConfigError(f"{directory}: no rubric configs (*.yaml) found")
    return [load_rubric(f) for f in files]
