"""Features any rubric can use: keywords, field overlap, grounding, fluency, context mentions, triples."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

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
from eval_pipeline.core.types import Record
from eval_pipeline.judge.heuristic import TextParams, feature
from eval_pipeline.judge.heuristic.base import saturate, text_of
from eval_pipeline.metrics import text_metrics

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


class KeywordParams(TextParams):
    keywords_field: str | None = None  # a list field of each sample; else the fixed ``keywords``
    keywords: list[str] | None = None
    saturate_at: float | None = None  # hits that count as full marks (default: half the keywords, at least 1)


@feature("keyword_presence", params=KeywordParams)
def keyword_presence(sample: Record, p: KeywordParams) -> float | None:
    """Share of keywords (a list field or a param) that appear in the text, saturating at `saturate_at` hits."""
    kws = sample.get(p.keywords_field) if p.keywords_field is not None else p.keywords
    if not kws:
        return None
    text_stems = stems(text_of(sample, p.text_field))
    hits = sum(1 for k in kws if stems(k) & text_stems)
    return saturate(hits, p.saturate_at if p.saturate_at is not None else max(1, len(kws) / 2))


class OverlapParams(TextParams):
    reference_field: str
    saturate_at: float = 0.5


@feature("field_overlap", params=OverlapParams)
def field_overlap(sample: Record, p: OverlapParams) -> float | None:
    """Share of a reference field's content words found in the text, saturating at `saturate_at`."""
    ref = content_words(text_of(sample, p.reference_field))
    if not ref:
        return None
    ov = overlap(ref, content_words(text_of(sample, p.text_field)))
    return saturate(ov or 0.0, p.saturate_at)


class GroundingParams(TextParams):
    source_field: str
    saturate_at: float = 0.9


@feature("grounding", params=GroundingParams)
def grounding(sample: Record, p: GroundingParams) -> float | None:
    """Share of the text's content words (and numbers) that occur in a source field."""
    text = text_of(sample, p.text_field)
    src = text_of(sample, p.source_field)
    tw = content_words(text)
    if not tw:
        return 0.0
    ov = overlap(tw, content_words(src)) or 0.0
    nums = numbers(text)
    if nums:
        src_nums = set(numbers(src))
        ov = 0.7 * ov + 0.3 * (sum(1 for n in nums if n in src_nums) / len(nums))
    return saturate(ov, p.saturate_at)


class VoiceParams(TextParams):
    phrases: list[str] = ASSISTANT_VOICE


@feature("not_assistant_voice", params=VoiceParams)
def not_assistant_voice(sample: Record, p: VoiceParams) -> float | None:
    text = text_of(sample, p.text_field)
    return max(0.0, 1.0 - 0.5 * count_phrases(text, p.phrases))


class FluencyParams(TextParams):
    typos: list[str] = ["teh", "recieve", "alot", "definately"]
    words: Annotated[list[int], Field(min_length=2, max_length=2)] = [5, 160]  # a sane length in words: from, to


@feature("fluency", params=FluencyParams)
def fluency(sample: Record, p: FluencyParams) -> float | None:
    """Observable fluency: sentence case, end punctuation, no repeated n-grams, no doubled words,
    no space before punctuation, a sane length."""
    text = text_of(sample, p.text_field)
    sents = sentences(text)
    if not sents:
        return 0.0
    cased = sum(1 for s in sents if s[0].isupper() or not s[0].isalpha()) / len(sents)
    ended = 1.0 if text.rstrip()[-1:] in ".!?\"')" else 0.5
    rep = repetition_rate(text, 3)
    toks = words(text)
    doubled = sum(1 for a, b in zip(toks, toks[1:]) if a == b and a.isalpha()) / max(1, len(toks))
    spacing = 1.0 - min(1.0, len(re.findall(r"\s[,.;:!?]", text)) / 3)
    typos = count_phrases(text, p.typos)
    n = len(toks)
    lo, hi = p.words
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


class DistinctParams(TextParams):
    n: int = 2


@feature("distinctness", params=DistinctParams)
def distinctness(sample: Record, p: DistinctParams) -> float | None:
    d = distinct_n(text_of(sample, p.text_field), p.n)
    return None if d is None else d


class OffTopicParams(TextParams):
    phrases: list[str] = ["by the way", "weather has been", "have you tried the bread"]


@feature("off_topic_penalty", params=OffTopicParams)
def off_topic_penalty(sample: Record, p: OffTopicParams) -> float | None:
    text = text_of(sample, p.text_field)
    return 0.0 if any_phrase(text, p.phrases) else 1.0


# --- game-state context and KG triples (the metrics' own definitions) ---------------------------


class ContextMentionParams(text_metrics.ContextParams):
    """The context_coverage metric's parameters, and the share that counts as full marks."""

    saturate_at: float = 0.8


@feature("context_mentions", params=ContextMentionParams)
def context_mentions(sample: Record, p: ContextMentionParams) -> float | None:
    """Share of game-state elements the text reflects (by value words or cue words)."""
    elements = [e for e in p.elements if sample.get(e) is not None]
    if not elements:
        return None
    text = text_of(sample, p.text_field)
    cues = {**text_metrics.CONTEXT_CUES, **p.cues}
    hits = sum(text_metrics.element_reflected(sample, e, text, cues) for e in elements)
    return saturate(hits / len(elements), p.saturate_at)


class TripleFeatureParams(text_metrics.TripleParams):
    """The triple_coverage metric's parameters (the feature's are theirs: the metric reads them as they are), and
    the share that counts as full marks."""

    saturate_at: float = 0.4


@feature("triple_coverage", params=TripleFeatureParams)
def triple_coverage_feature(sample: Record, p: TripleFeatureParams) -> float | None:
    if not sample.get(p.triples_field):
        return None
    share = text_metrics.triple_coverage([sample], p)["triple_coverage"][0]
    return saturate(float(share or 0.0), p.saturate_at)


# --- empathetic dialogue ----------------------------------------------------------------------
