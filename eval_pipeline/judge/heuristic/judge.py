"""The code of eval_pipeline.judge.heuristic: its contract is the package's docstring."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable
from typing import Any

from eval_pipeline.core.config import HeuristicTerm, RubricConfig
from eval_pipeline.core.params import NoParams, Params, typed
from eval_pipeline.core.registry import Registry
from eval_pipeline.core.resampling import seed_of
from eval_pipeline.core.types import Record

Feature = Callable[[Record, Any], "float | None"]
FEATURES: Registry[Feature] = Registry("heuristic feature", "eval_pipeline.judge.heuristic", skip=("judge",))


def feature(name: str, params: type[Params] = NoParams) -> Callable[[Feature], Feature]:
    """Register a heuristic feature under ``name`` with its parameters' model (a new feature is one function and
    its ``Params`` in this package); the function receives the validated ``params``."""

    def add(fn: Feature) -> Feature:
        unit = typed(params)(fn)
        FEATURES.add(name, unit)
        return unit

    return add


class TextParams(Params):
    """The field a feature reads its text from."""

    text_field: str = "response"


def load_features() -> Registry[Feature]:
    """Every feature (importing this package's modules registers them, once)."""
    return FEATURES.load()


def estimate(terms: list[HeuristicTerm], sample: Record) -> tuple[float | None, dict[str, float | None]]:
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


SPREAD = 0.15  # the declared SD of the heuristic's placement, as a share of the scale's width
DRIFT = 0.08  # the SD of the point's move when asked again, as a share of the scale's width


@functools.lru_cache(maxsize=65536)
def distribution(f: float, lo: int, hi: int) -> dict[int, float]:
    """The heuristic's distribution over lo..hi: a normal around x = lo + f (hi - lo) with SD SPREAD (hi - lo) on
    the whole numbers, tilted (p ~ exp(t v) times the normal) so that its mean is x itself: the scale's ends do
    not pull the expected score inwards, and at an end the judge is certain. t by Newton's method: the mean
    grows with t, its slope is the variance."""
    x = min(max(lo + f * (hi - lo), lo), hi)
    sd = max(SPREAD * (hi - lo), 1e-9)
    values = range(lo, hi + 1)
    if x <= lo or x >= hi:
        return {v: float(v == x) for v in values}

    def tilted(t: float) -> dict[int, float]:
        logw = {v: t * (v - x) - 0.5 * ((v - x) / sd) ** 2 for v in values}
        top = max(logw.values())
        w = {v: math.exp(lw - top) for v, lw in logw.items()}
        total = sum(w.values())
        return {v: wv / total for v, wv in w.items()}

    t, lo_t, hi_t = 0.0, -200.0, 200.0
    for _ in range(100):
        p = tilted(t)
        mean = sum(v * q for v, q in p.items())
        if abs(mean - x) < 1e-12:
            break
        lo_t, hi_t = (t, hi_t) if mean < x else (lo_t, t)
        var = sum((v - mean) ** 2 * q for v, q in p.items())
        step = t - (mean - x) / var if var > 1e-12 else (lo_t + hi_t) / 2
        t = step if lo_t < step < hi_t else (lo_t + hi_t) / 2  # Newton, kept inside the bracket
    return p


def _uniform(*seed_parts: object) -> float:
    """A number in [0, 1), the same for the same seed parts on every run (the pipeline's seed, scaled)."""
    return seed_of(*seed_parts) / 2**32


def draw(dist: dict[int, float], u: float) -> int:
    """The score at quantile ``u`` of ``dist``."""
    acc = 0.0
    for v, p in dist.items():
        acc += p
        if u < acc:
            return v
    return max(dist)


Scored = tuple["int | None", str, "dict[int, float] | None"]


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

    def score(self, sample: Record, repeat: int = 0) -> dict[str, Scored]:
        """Dimension (or questionnaire item) -> (score or None, rationale, distribution over the scale or None).
        ``repeat`` 0: the most likely score; > 0: a seeded draw from the distribution (asked again)."""
        out: dict[str, Scored] = {}

        def scored(key: str, f: float, lo: int, hi: int, why: str) -> Scored:
            if repeat == 0:
                return to_scale(f, lo, hi), why, distribution(f, lo, hi)
            seed = (self.rubric.name, sample.get("sample_id"), key, repeat)
            moved = f + DRIFT * statistics.NormalDist().inv_cdf(min(max(_uniform(*seed, "drift"), 1e-9), 1 - 1e-9))
            dist = distribution(moved, lo, hi)
            return draw(dist, _uniform(*seed, "draw")), why, dist

        for d in self.rubric.judged_dimensions:
            if d.key in self.unsupported:
                out[d.key] = (None, "no heuristic declared for this dimension", None)
                continue
            sc = self.rubric.scale_of(d)
            f, values = estimate(d.heuristic, sample)
            out[d.key] = (
                (None, "no applicable feature", None)
                if f is None
                else scored(d.key, f, sc.min, sc.max, f"features {values}")
            )
        q = self.rubric.questionnaire
        if q:
            for m in q.metrics:
                if m.key in self.unsupported:
                    for item in m.items:
                        out[item.id] = (None, "no heuristic declared for this metric", None)
                    continue
                f, values = estimate(m.heuristic, sample)
                for item in m.items:
                    if f is None:
                        out[item.id] = (None, "no applicable feature", None)
                        continue
                    # a reverse-worded item is answered as its mirror, so reverse scoring restores f
                    g = 1.0 - f if item.reverse else f
                    out[item.id] = scored(item.id, g, q.scale.min, q.scale.max, f"{m.key} features {values}")
        return out
