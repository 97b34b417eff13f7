"""The rubric config: one YAML file, typed, cross-checked, hashed into its versions."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from eval_pipeline.core import settings
from eval_pipeline.core.config.alignment import AlignedJudge, AlignSpec, overlay, overlay_path
from eval_pipeline.core.config.dimensions import Dimension, Example, Questionnaire, Scale
from eval_pipeline.core.config.gates import Gate
from eval_pipeline.core.config.inputs import InputsSpec
from eval_pipeline.core.config.problems import field_path, load_yaml, problem_message, with_hint, yaml_problem
from eval_pipeline.core.config.protocol import (
    Adjustment,
    Completeness,
    Extraction,
    HumanRatingsSpec,
    JudgePanel,
    MetricSpec,
    RepeatSpec,
    WorklistSpec,
)
from eval_pipeline.core.derived import DerivedScore
from eval_pipeline.core.ids import UnsafeIdentifierError, check_identifier
from eval_pipeline.core.strict import Strict


class RubricConfig(Strict):
    name: str = Field(description="The rubric's name: its asset group and warehouse schema (letters, digits, _).")
    title: str = Field(description="A human title.")
    source: str = Field(description="The rubric document this config is written from.")
    description: str = Field(description="What the rubric evaluates, for people.")
    scale: Scale = Field(description="The default scale of its dimensions.")
    inputs: InputsSpec = Field(description="The raw sample's fields: types and checks (the validation schema).")
    dimensions: list[Dimension] = Field(default_factory=list, description="What is scored, by the judge or by people.")
    examples: list[Example] = Field(
        default_factory=list, description="The document's worked examples: re-scored by the judge (judge_calibration)."
    )
    questionnaire: Questionnaire | None = Field(None, description="A Likert questionnaire the judge answers.")
    extraction: Extraction | None = Field(None, description="LLM extraction prompts a metric reads (e.g. ALMP).")
    judge_instructions: str = Field("", description="Added to the judge's prompt.")
    metrics: list[MetricSpec] = Field(default_factory=list, description="Deterministic metrics (see Metric functions).")
    adjustments: list[Adjustment] = Field(default_factory=list, description="Rules that cap or change a score.")
    derived: list[DerivedScore] = Field(default_factory=list, description="Scores computed from other scores.")
    headline: str = Field(description="The score that ranks checkpoints on the leaderboard.")
    breakdowns: list[list[str]] = Field(default_factory=list, description="Input fields to break summaries down by.")
    guarded_dimensions: list[str] = Field(
        default_factory=list, description="Scores whose regression fails the regression gate."
    )
    lower_is_better: list[str] = Field(
        default_factory=list, description="Scores where a decrease is an improvement (e.g. ERTD)."
    )
    gates: list[Gate] = Field(default_factory=list, description="Threshold gates, each an asset check.")
    panel: JudgePanel = Field(default_factory=JudgePanel, description="The LLM judges and how they are aggregated.")
    human_ratings: HumanRatingsSpec = Field(default_factory=HumanRatingsSpec, description="How rating CSVs are read.")
    worklists: WorklistSpec = Field(default_factory=WorklistSpec, description="Samples written out for people to rate.")
    completeness: Completeness = Field(default_factory=Completeness)
    repeat: RepeatSpec | None = Field(None, description="Score a subset again to measure the judge's own noise.")
    few_shot: list[Example] = Field(
        default_factory=list,
        description="Rated samples shown to the judge with the people's scores (written by adopting an alignment).",
    )
    align: AlignSpec = Field(default_factory=AlignSpec, description="What `eval-pipeline align` may search.")
    aligned: AlignedJudge | None = Field(
        None, description="The adopted alignment this judge comes from (its overlay file, aligned/<rubric>.yaml)."
    )

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        try:
            return check_identifier(v, "rubric name")
        except UnsafeIdentifierError as exc:
            raise ValueError(str(exc)) from exc

    @model_validator(mode="after")
    def _cross_checks(self, info: ValidationInfo) -> RubricConfig:
        if info.context and info.context.get("collect_problems"):
            return self  # load_rubric reports them, with every other problem of the file
        problems = cross_problems(self)
        if problems:
            raise ValueError("; ".join(f"{where}: {what}" for where, what in problems))
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
            "few_shot",
            "aligned",
        )
        blob = json.dumps(
            _unset_left_out(self.model_dump(mode="json", include=set(keep))),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    @cached_property
    def version(self) -> str:
        """SHA-256 (first 16 hex digits) of the canonical JSON form of the config."""
        return rubric_hash(self)


# long by design: every cross-reference of the config, in the order a reader checks them, each problem with the path
# of the field (by key, not list index); splitting it scatters the list
def cross_problems(cfg: RubricConfig) -> list[tuple[str, str]]:
    """Every reference between parts of the config that does not resolve, as (field path, problem)."""
    out: list[tuple[str, str]] = []
    keys = [d.key for d in cfg.dimensions]
    out += [(f"dimensions.{k}", "duplicate dimension key") for k in sorted({k for k in keys if keys.count(k) > 1})]
    input_names = {f.name for f in cfg.inputs.fields}
    out += [(f"dimensions.{k}", "clashes with an input field name") for k in sorted(set(keys) & input_names)]
    for d in cfg.dimensions:
        expected = set(cfg.scale_of(d).labels)
        if set(d.levels) != expected:
            out.append(
                (
                    f"dimensions.{d.key}.levels",
                    f"levels must give an anchor for every score {sorted(expected)}, got {sorted(d.levels)}",
                )
            )
    by_key = {d.key: d for d in cfg.dimensions}
    for ex in cfg.examples:
        for key, score in ex.scores.items():
            if key not in by_key:
                out.append((f"examples.{ex.id}.scores.{key}", f"example scores unknown dimension {key!r}"))
                continue
            sc = cfg.scale_of(by_key[key])
            if not sc.min <= score <= sc.max:
                out.append((f"examples.{ex.id}.scores.{key}", f"score {score} is off the scale {sc.min}-{sc.max}"))
    if not cfg.dimensions and cfg.questionnaire is None:
        out.append(("dimensions", "a rubric needs dimensions or a questionnaire"))
    known = set(keys) | {s.name for s in cfg.derived} | set(cfg.questionnaire_scores)
    for s in cfg.derived:
        missing = [r for r in s.refs() if r not in known]
        if missing:
            out.append((f"derived.{s.name}", f"refers to unknown scores {missing}"))
    if cfg.headline not in known:
        out.append(("headline", f"{cfg.headline!r} is neither a dimension nor a derived score"))
    names = [g.name for g in cfg.gates]
    out += [(f"gates.{n}", "gate names must be unique") for n in sorted({n for n in names if names.count(n) > 1})]
    for g in cfg.gates:
        bad = [d for d in (g.dimensions or []) if d not in keys]
        if bad:
            out.append((f"gates.{g.name}.dimensions", f"unknown dimensions {bad}"))
        if g.score is not None and g.score not in known:
            out.append((f"gates.{g.name}.score", f"unknown score {g.score!r}"))
    for group in cfg.breakdowns:
        bad = [c for c in group if c not in input_names]
        if bad:
            out.append((f"breakdowns.{'|'.join(group)}", f"unknown input fields {bad}"))
    out += [
        (f"adjustments.{a.dimension}", f"unknown dimension {a.dimension!r}")
        for a in cfg.adjustments
        if a.dimension not in keys
    ]
    for field_name in ("lower_is_better", "guarded_dimensions"):
        bad = [d for d in getattr(cfg, field_name) if d not in known]
        if bad:
            out.append((field_name, f"unknown scores {bad}"))
    for where, fields in (
        ("worklists.strata", cfg.worklists.strata),
        ("worklists.sheet_fields", cfg.worklists.sheet_fields),
    ):
        out += [(f"{where}.{f}", f"unknown input field {f!r}") for f in fields if f not in input_names]
    if cfg.human_ratings.pass_fail and cfg.human_ratings.pass_fail.score not in known:
        out.append(("human_ratings.pass_fail.score", f"unknown score {cfg.human_ratings.pass_fail.score!r}"))
    if cfg.worklists.rereview and cfg.worklists.rereview.score not in known:
        out.append(("worklists.rereview.score", f"unknown score {cfg.worklists.rereview.score!r}"))
    return out


class RubricConfigError(ValueError):
    """A rubric YAML that cannot be used; the message names file, field and problem."""


# what an alignment adds, left out of the hashes while unset (a rubric no one aligned keeps its versions and its
# judge cache); the search settings never change an asset but the alignment's own
_LEFT_OUT_UNSET = ("few_shot", "aligned")


def _unset_left_out(dumped: dict[str, Any]) -> dict[str, Any]:
    dumped.pop("align", None)
    for key in _LEFT_OUT_UNSET:
        if key in dumped and not dumped[key]:
            del dumped[key]
    return dumped


def rubric_hash(cfg: RubricConfig) -> str:
    canonical = json.dumps(
        _unset_left_out(cfg.model_dump(mode="json")), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


Check = Callable[["RubricConfig"], list[tuple[str, str]]]


def parse_rubric(path: str | Path, checks: Sequence[Check] = ()) -> RubricConfig:
    """One rubric YAML, with every problem it has reported at once: types, references, and what each of
    ``checks`` finds (the registries' names: ``eval_pipeline.rubrics`` passes them; the config layer never
    imports a registry)."""
    path = Path(path)
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise RubricConfigError(f"{path}: rubric config not found") from exc
    except yaml.YAMLError as exc:
        raise RubricConfigError(yaml_problem(path, exc)) from exc
    except UnicodeDecodeError as exc:
        raise RubricConfigError(f"{path}: not UTF-8 text: {exc}") from exc
    except RecursionError:
        raise RubricConfigError(f"{path}: nested too deeply to read (a value inside hundreds of others)") from None
    if not isinstance(raw, dict):
        raise RubricConfigError(f"{path}: field '<top level>': expected a mapping, got {type(raw).__name__}")
    raw = _with_adopted(path, raw)
    try:
        cfg = RubricConfig.model_validate(raw, context={"collect_problems": True})
    except RecursionError:
        raise RubricConfigError(f"{path}: nested too deeply to check (a value inside hundreds of others)") from None
    except ValidationError as exc:
        problems = [(field_path(raw, tuple(e["loc"])), with_hint(e, RubricConfig)) for e in exc.errors()]
        raise RubricConfigError(problem_message(path, problems)) from exc
    problems = cross_problems(cfg) + [p for check in checks for p in check(cfg)]
    if cfg.name != path.stem:
        problems.insert(0, ("name", f"{cfg.name!r} must match the file name {path.stem!r}"))
    if problems:
        raise RubricConfigError(problem_message(path, problems))
    return cfg


def _with_adopted(path: Path, raw: dict[str, Any]) -> dict[str, Any]:
    """The rubric's mapping with its adopted alignment (``aligned/<rubric>.yaml`` beside it) laid over it."""
    over_file = overlay_path(path)
    if not over_file.is_file():
        return raw
    try:
        over = load_yaml(over_file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RubricConfigError(yaml_problem(over_file, exc)) from exc
    except UnicodeDecodeError as exc:
        raise RubricConfigError(f"{over_file}: not UTF-8 text: {exc}") from exc
    if not isinstance(over, dict):
        raise RubricConfigError(f"{over_file}: an adopted alignment must be a mapping")
    try:
        return overlay(raw, over)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise RubricConfigError(f"{over_file}: {exc}") from exc


def parse_rubrics(directory: str | Path | None = None, checks: Sequence[Check] = ()) -> list[RubricConfig]:
    """Every rubric YAML of ``directory`` (default EVAL_RUBRIC_DIR), each checked with ``checks``; every broken
    file is reported, not only the first."""
    directory = Path(directory) if directory else settings.rubric_dir()
    files = sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml"))
    if not files:
        raise RubricConfigError(f"{directory}: no rubric configs (*.yaml) found")
    rubrics, errors = [], []
    for f in files:  # every file is read, so one broken file does not hide another's problems
        try:
            rubrics.append(parse_rubric(f, checks))
        except RubricConfigError as exc:
            errors.append(str(exc))
    by_name: dict[str, list[str]] = {}
    for f in files:
        by_name.setdefault(f.stem.casefold(), []).append(f.name)
    errors += [
        f"{directory}: {' and '.join(names)} name the same rubric (file names differ only by case or "
        "extension): keep one"
        for names in by_name.values()
        if len(names) > 1
    ]
    if errors:
        head = f"{len(errors)} of {len(files)} rubric configs in {directory} are invalid"
        raise RubricConfigError(head + "\n" + "\n".join(errors))
    return rubrics
