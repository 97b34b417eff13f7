"""Features for role-play style: similarity to the character's sample dialogues, attributes present."""

from __future__ import annotations

from rapidfuzz import fuzz

from eval_pipeline.core.types import Record
from eval_pipeline.judge.heuristic import TextParams, feature
from eval_pipeline.judge.heuristic.base import saturate, text_of
from eval_pipeline.metrics.style import char_ngram_cosine, strip_speaker_prefixes


class StyleParams(TextParams):
    reference_field: str = "sample_dialogues"
    n: int = 3  # character n-gram length
    saturate_at: float = 0.6


@feature("style_similarity", params=StyleParams)
def style_similarity(sample: Record, p: StyleParams) -> float | None:
    ref = strip_speaker_prefixes(sample.get(p.reference_field) or [])
    val = char_ngram_cosine(ref, text_of(sample, p.text_field), p.n)
    return saturate(val, p.saturate_at)


class AttributeParams(TextParams):
    attributes_field: str = "attributes"
    saturate_at: float = 0.6


@feature("attribute_presence", params=AttributeParams)
def attribute_presence(sample: Record, p: AttributeParams) -> float | None:
    attrs = sample.get(p.attributes_field) or []
    if not attrs:
        return None
    text = text_of(sample, p.text_field).lower()
    hits = sum(1 for a in attrs if a.lower() in text or fuzz.partial_ratio(a.lower(), text) > 85)
    return saturate(hits / len(attrs), p.saturate_at)


# --- the judge --------------------------------------------------------------------------------
