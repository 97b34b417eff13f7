"""The offline judge's search space: each feature's weight, in turn, multiplied by ``AlignSpec.weight_steps``."""

from __future__ import annotations

from typing import Any

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.config.alignment import AlignSpec
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.judge.align.space import AXES, Axis, Changes, Shots
from eval_pipeline.judge.identity import HEURISTIC


def _weight_axis(dim: str, feature: str, base: float, steps: list[float]) -> Axis:
    def apply(changes: Changes, factor: Any, shots: Shots) -> None:
        if factor != 1.0:
            changes.setdefault("heuristic_weights", {}).setdefault(dim, {})[feature] = round(base * factor, 6)

    return Axis(
        name=f"weight:{dim}:{feature}",
        values=[1.0] + [s for s in steps if s != 1.0],
        apply=apply,
        describe=lambda factor: f"{dim}.{feature} weight x{factor:g}",
        calls_per_item=lambda factor: 0,
    )


@AXES.register(HEURISTIC)
def heuristic_axes(rubric: RubricConfig, spec: AlignSpec, config: JudgeConfig, dimensions: list[str]) -> list[Axis]:
    """One axis per feature of each target dimension (or questionnaire metric) that weighs two or more features:
    a weight only matters beside another."""
    holders = [(d.key, d.heuristic) for d in rubric.judged_dimensions]
    if rubric.questionnaire:
        holders += [(m.key, m.heuristic) for m in rubric.questionnaire.metrics]
    return [
        _weight_axis(key, t.feature, t.weight, spec.weight_steps)
        for key, terms in holders
        if key in dimensions and len(terms) >= 2
        for t in terms
    ]
