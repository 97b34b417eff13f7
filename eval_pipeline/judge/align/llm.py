"""A model judge's search space (any OpenAI-compatible endpoint): the instruction variants and score-anchor wordings
the rubric allows, few-shot examples from the tuning folds, where the scores come from, and the sampling
temperature."""

from __future__ import annotations

from typing import Any

from eval_pipeline.core.config import JudgeSpec, RubricConfig
from eval_pipeline.core.config.alignment import AlignSpec
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.judge.align.space import AXES, Axis, Changes, Shots
from eval_pipeline.judge.backends.openai import OPENAI

EXPECTED_TOP_LOGPROBS = 5  # what an ``expected`` candidate asks for when the judge asked for none


def _judges(rubric: RubricConfig) -> list[JudgeSpec]:
    return rubric.panel.judges or [JudgeSpec(name="default")]


def _set_judges(changes: Changes, rubric: RubricConfig, **fields: Any) -> None:
    """Set ``fields`` on every judge of the panel (merged with what other axes set)."""
    panel = changes.setdefault("panel", {})
    by_name = {j["name"]: j for j in panel.get("judges", [])}
    for spec in _judges(rubric):
        entry = by_name.setdefault(spec.name, {"name": spec.name})
        for key, value in fields.items():
            entry[key] = max(value, getattr(spec, key)) if key == "top_logprobs" else value
    panel["judges"] = list(by_name.values())


@AXES.register(OPENAI)
def model_axes(rubric: RubricConfig, spec: AlignSpec, config: JudgeConfig, dimensions: list[str]) -> list[Axis]:
    """Instructions, then anchor wordings, then few-shot examples, then the score source, then the temperature (the
    cheapest first)."""
    axes = []
    if spec.instructions:

        def instructions(changes: Changes, v: Any, shots: Shots) -> None:
            if v is not None:
                changes["judge_instructions"] = spec.instructions[v]

        axes.append(
            Axis(
                "instructions",
                [None, *range(len(spec.instructions))],
                instructions,
                lambda v: f"instructions #{v + 1} ({' '.join(spec.instructions[v].split())[:48]}...)",
            )
        )
    if spec.anchors:

        def anchors(changes: Changes, v: Any, shots: Shots) -> None:
            if v is not None:
                changes["anchors"] = spec.anchors[v]

        def worded(v: Any) -> str:
            return f"anchor wording #{v + 1} ({', '.join(sorted(spec.anchors[v]))})"

        axes.append(Axis("anchors", [None, *range(len(spec.anchors))], anchors, worded))
    counts = [k for k in spec.few_shot if k > 0]
    if counts:

        def few_shot(changes: Changes, k: Any, shots: Shots) -> None:
            if k:
                changes["few_shot"] = shots(int(k))

        axes.append(
            Axis(
                "few_shot",
                [None, *counts],
                few_shot,
                lambda k: f"{k} rated example(s)",
                varies_by_fold=lambda k: bool(k),
            )
        )
    sources = [s for s in spec.score_sources if s != rubric.panel.score_source]
    if sources:

        def source(changes: Changes, s: Any, shots: Shots) -> None:
            if s is not None:
                changes.setdefault("panel", {})["score_source"] = s
                if s == "expected":
                    _set_judges(changes, rubric, top_logprobs=EXPECTED_TOP_LOGPROBS)

        axes.append(Axis("score_source", [None, *sources], source, lambda s: f"{s} scores"))
    temperatures = [t for t in spec.temperatures if all(t != j.temperature for j in _judges(rubric))]
    if temperatures:

        def temperature(changes: Changes, t: Any, shots: Shots) -> None:
            if t is not None:
                _set_judges(changes, rubric, temperature=float(t))

        axes.append(Axis("temperature", [None, *temperatures], temperature, lambda t: f"temperature {t:g}"))
    return axes
