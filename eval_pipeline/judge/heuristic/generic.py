"""Features any rubric can use: keywords, field overlap, grounding, fluency, context mentions, triples."""

from __future__ import annotations

import re

from eval_pipeline.core.text import (
    any_phrase,
    content_words,
    count_phrases,
    distinct_n,
    numbers,
    overlap,
    repetition_rate,
    sentences,
    stems,
    words,
)
from eval_pipeline.judge.heuristic import feature
from eval_pipeline.judge.heuristic.base import _saturate, _text

ASSISTANT_VOICE = [
    "how can i assist",
    "as an ai",
    "as an npc",
    "as a language model",
    "thank you for your question",
    "here is the answer",
    "is there anything else i can help",
    "i would be happy to",
]


@feature("keyword_presence")
def keyword_presence(sample: dict, p: dict) -> float | None:
    """Share of keywords (a list field or a param) that appear in the text, saturating at `saturate_at` hits."""
    kws = sample.get(p["keywords_field"]) if "keywords_field" in p else p.get("keywords")
    if not kws:
        return None
    text_stems = stems(_text(sample, p.get("text_field", "response")))
    hits = sum(1 for k in kws if stems(k) & text_stems)
    return _saturate(hits, p.get("saturate_at", max(1, len(kws) / 2)))


@feature("field_overlap")
def field_overlap(sample: dict, p: dict) -> float | None:
    """Share of a reference field's content words found in the text, saturating at `saturate_at`."""
    ref = content_words(_text(sample, p["reference_field"]))
    if not ref:
        return None
    ov = overlap(ref, content_words(_text(sample, p.get("text_field", "response"))))
    return _saturate(ov or 0.0, p.get("saturate_at", 0.5))


@feature("grounding")
def grounding(sample: dict, p: dict) -> float | None:
    """Share of the text's content words (and numbers) that occur in a source field."""
    text = _text(sample, p.get("text_field", "response"))
    src = _text(sample, p["source_field"])
    tw = content_words(text)
    if not tw:
        return 0.0
    ov = overlap(tw, content_words(src)) or 0.0
    nums = numbers(text)
    if nums:
        src_nums = set(numbers(src))
        ov = 0.7 * ov + 0.3 * (sum(1 for n in nums if n in src_nums) / len(nums))
    return _saturate(ov, p.get("saturate_at", 0.9))


@feature("not_assistant_voice")
def not_assistant_voice(sample: dict, p: dict) -> float | None:
    text = _text(sample, p.get("text_field", "response"))
    return max(0.0, 1.0 - 0.5 * count_phrases(text, p.get("phrases", ASSISTANT_VOICE)))


@feature("fluency")
def fluency(sample: dict, p: dict) -> float | None:
    """Observable fluency: sentence case, end punctuation, no repeated n-grams, no doubled words,
    no space before punctuation, a sane length."""
    text = _text(sample, p.get("text_field", "response"))
    sents = sentences(text)
    if not sents:
        return 0.0
    cased = sum(1 for s in sents if s[0].isupper() or not s[0].isalpha()) / len(sents)
    ended = 1.0 if text.rstrip()[-1:] in ".!?\"')" else 0.5
    rep = repetition_rate(text, 3)
    toks = words(text)
    doubled = sum(1 for a, b in zip(toks, toks[1:]) if a == b and a.isalpha()) / max(1, len(toks))
    spacing = 1.0 - min(1.0, len(re.findall(r"\s[,.;:!?]", text)) / 3)
    typos = count_phrases(text, p.get("typos", ["teh", "recieve", "alot", "definately"]))
    n = len(toks)
    lo, hi = p.get("words", [5, 160])
    length = 1.0 if lo <= n <= hi else 0.6
    stock = 1.0 - min(1.0, 0.5 * count_phrases(text, ASSISTANT_VOICE))
    score = (
        0.2 * cased
        + 0.1 * ended
        + 0.25 * (1 - min(1.0, rep * 3))
        + 0.05 * (1 - min(1.0, doubled * 10))
        + 0.1 * spacing
        + 0.1 * (1 - min(1.0, typos / 2))
        + 0.1 * length
        + 0.1 * stock
    )
    return max(0.0, min(1.0, score))


@feature("distinctness")
def distinctness(sample: dict, p: dict) -> float | None:
    d = distinct_n(_text(sample, p.get("text_field", "response")), p.get("n", 2))
    return None if d is None else d


@feature("off_topic_penalty")
def off_topic_penalty(sample: dict, p: dict) -> float | None:
    text = _text(sample, p.get("text_field", "response"))
    return (
        0.0
        if any_phrase(text, p.get("phrases", ["by the way", "weather has been", "have you tried the bread"]))
        else 1.0
    )


# --- game-state context and KG triples (the metrics' own definitions) ---------------------------


@feature("context_mentions")
def context_mentions(sample: dict, p: dict) -> float | None:
    """Share of game-state elements the text reflects (by value words or cue words)."""
    from eval_pipeline.metrics.text_metrics import CONTEXT_CUES, element_reflected

    elements = [e for e in p["elements"] if sample.get(e) is not None]
    if not elements:
        return None
    text = _text(sample, p.get("text_field", "response"))
    cues = {**CONTEXT_CUES, **p.get("cues", {})}
    hits = sum(element_reflected(sample, e, text, cues) for e in elements)
    return _saturate(hits / len(elements), p.get("saturate_at", 0.8))


@feature("triple_coverage")
def triple_coverage_feature(sample: dict, p: dict) -> float | None:
    from eval_pipeline.metrics.text_metrics import triple_coverage

    if not sample.get(p.get("triples_field", "kg_triples")):
        return None
    share = triple_coverage([sample], {**p, "fuzzy_threshold": p.get("fuzzy_threshold", 85)})["triple_coverage"][0]
    return _saturate(share or 0.0, p.get("saturate_at", 0.4))


# --- empathetic dialogue ----------------------------------------------------------------------
