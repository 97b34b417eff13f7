"""Features for role-play style: similarity to the character's sample dialogues, attributes present."""

from __future__ import annotations

from rapidfuzz import fuzz

from eval_pipeline.judge.heuristic import feature
from eval_pipeline.judge.heuristic.base import _saturate, _text


@feature("style_similarity")
def style_similarity(sample: dict, p: dict) -> float | None:
    from eval_pipeline.metrics.style import char_ngram_cosine, strip_speaker_prefixes

    ref = strip_speaker_prefixes(sample.get(p.get("reference_field", "sample_dialogues")) or [])
    val = char_ngram_cosine(ref, _text(sample, p.get("text_field", "response")), p.get("n", 3))
    return _saturate(val, p.get("saturate_at", 0.6))


@feature("attribute_presence")
def attribute_presence(sample: dict, p: dict) -> float | None:
    attrs = sample.get(p.get("attributes_field", "attributes")) or []
    if not attrs:
        return None
    text = _text(sample, p.get("text_field", "response")).lower()
    hits = sum(1 for a in attrs if a.lower() in text or fuzz.partial_ratio(a.lower(), text) > 85)
    return _saturate(hits / len(attrs), p.get("saturate_at", 0.6))


# --- the judge --------------------------------------------------------------------------------
