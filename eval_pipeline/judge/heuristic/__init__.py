"""The offline heuristic judge: deterministic, rule-based, honest.

It scores only from observable features of the sample (words present, fields
mentioned, numbers matched, phrases used), never poses as an LLM, and is
labelled ``heuristic`` wherever its scores appear. Which features estimate a
dimension is declared in the rubric YAML (``heuristic:`` on each dimension or
questionnaire metric); each feature returns a value in [0, 1] (or None when it
does not apply), the weighted mean of the applicable terms maps linearly onto
the dimension's scale. Text inside the sample cannot change the rules: there is
no instruction channel, only features.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable
from typing import Any

from eval_pipeline.core.config import HeuristicTerm, RubricConfig

Feature = Callable[[dict[str, Any], dict[str, Any]], "float | None"]
FEATURES: dict[str, Feature] = {}


def feature(name: str) -> Callable[[Feature], Feature]:
    def register(fn: Feature) -> Feature:
        if name in FEATURES:
            raise ValueError(f"heuristic feature {name!r} registered twice")
        FEATURES[name] = fn
        return fn

    return register


def load_features() -> dict[str, Feature]:
    """Every feature: importing this package's modules registers them (a new feature is one function)."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return FEATURES


def estimate(terms: list[HeuristicTerm], sample: dict) -> tuple[float | None, dict[str, float | None]]:
    """Weighted mean of the applicable terms, and each term's value (for the rationale)."""
    values: dict[str, float | None] = {}
    num = den = 0.0
    for t in terms:
        fn = load_features().get(t.feature)
        if fn is None:
            raise KeyError(f"unknown heuristic feature {t.feature!r} (known: {sorted(FEATURES)})")
        v = fn(sample, t.params)
        values[t.feature] = None if v is None else round(float(v), 3)
        if v is not None and math.isfinite(v):
            num += t.weight * v
            den += t.weight
    return (num / den if den else None), values


def to_scale(f: float, lo: int, hi: int) -> int:
    return int(max(lo, min(hi, math.floor(lo + f * (hi - lo) + 0.5))))


class HeuristicJudge:
    """Rule-based scores from observable features. Not an LLM; labelled 'heuristic'."""

    name = "heuristic"
    kind = "heuristic"
    model = "rules"

    def __init__(self, rubric: RubricConfig):
        self.rubric = rubric
        missing = [d.key for d in rubric.judged_dimensions if not d.heuristic]
        if rubric.questionnaire:
            missing += [m.key for m in rubric.questionnaire.metrics if not m.heuristic]
        self.unsupported = set(missing)

    def score(self, sample: dict) -> dict[str, tuple[int | None, str]]:
        """Dimension (or questionnaire item) -> (score or None, rationale)."""
        out: dict[str, tuple[int | None, str]] = {}
        for d in self.rubric.judged_dimensions:
            if d.key in self.unsupported:
                out[d.key] = (None, "no heuristic declared for this dimension")
                continue
            sc = self.rubric.scale_of(d)
            f, values = estimate(d.heuristic, sample)
            out[d.key] = (
                (None, "no applicable feature") if f is None else (to_scale(f, sc.min, sc.max), f"features {values}")
            )
        q = self.rubric.questionnaire
        if q:
            for m in q.metrics:
                if m.key in self.unsupported:
                    for item in m.items:
                        out[item.id] = (None, "no heuristic declared for this metric")
                    continue
                f, values = estimate(m.heuristic, sample)
                for item in m.items:
                    if f is None:
                        out[item.id] = (None, "no applicable feature")
                        continue
                    # a reverse-worded item is answered as its mirror, so reverse scoring restores f
                    g = 1.0 - f if item.reverse else f
                    out[item.id] = (to_scale(g, q.scale.min, q.scale.max), f"{m.key} features {values}")
        return out
