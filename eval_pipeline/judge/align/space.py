"""The alignment search space: the axes a judge backend offers (``AXES``, one module of this package a backend,
registered under the backend's name) and the shapes they are made of."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.config.alignment import AlignSpec
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.registry import Registry

# the changes a candidate makes to the rubric's mapping (core.config.alignment.overlay's keys)
Changes = dict[str, Any]
# k few-shot examples (as the rubric's mapping holds them) from the items a candidate may learn from
Shots = Callable[[int], list[dict[str, Any]]]


@dataclass(frozen=True)
class Axis:
    """One direction the search moves along: its name, the values it may take (the first: the current judge's)
    and how a value changes the rubric. ``apply(changes, value, shots)`` adds the value's change to ``changes``;
    ``shots(k)`` gives k few-shot examples from the items the candidate may learn from."""

    name: str
    values: list[Any]
    apply: Callable[[Changes, Any, Shots], None]
    describe: Callable[[Any], str]
    calls_per_item: Callable[[Any], int] = lambda value: 1  # judge prompts per item and fold-set (0: offline)
    varies_by_fold: Callable[[Any], bool] = lambda value: False  # the prompt depends on the training folds


class AxesFor(Protocol):
    def __call__(
        self, rubric: RubricConfig, spec: AlignSpec, config: JudgeConfig, dimensions: list[str]
    ) -> list[Axis]: ...


AXES: Registry[AxesFor] = Registry("alignment search space", "eval_pipeline.judge.align", skip=("space", "search"))


def load_axes() -> Registry[AxesFor]:
    """Every backend's search space (importing this package's modules registers them, once)."""
    return AXES.load()
