"""Helpers the features share: a field as text, a count saturated into [0, 1]."""

from __future__ import annotations

from eval_pipeline.core.types import Record


def text_of(sample: Record, field: str) -> str:
    v = sample.get(field)
    if v is None:
        return ""
    if isinstance(v, list):
        return " ".join(
            x if isinstance(x, str) else " ".join(map(str, x.values())) if isinstance(x, dict) else str(x) for x in v
        )
    if isinstance(v, dict):
        return " ".join(str(x) for x in v.values())
    return str(v)


def saturate(x: float, at: float) -> float:
    return max(0.0, min(1.0, x / at)) if at > 0 else 1.0
