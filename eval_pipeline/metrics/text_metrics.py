"""Text metrics: game-state context coverage, persona keyword overlap, distinct-n, repetition,
KG triple coverage and grounding overlap."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from rapidfuzz import fuzz

from eval_pipeline.core.params import Params
from eval_pipeline.core.text import (
    any_phrase,
    content_stems,
    content_words,
    repetition_rate,
    stem_share,
    stems,
)
from eval_pipeline.core.text import distinct_n as distinct_of
from eval_pipeline.core.types import Columns, Record, Value
from eval_pipeline.metrics import metric

# Cue words for game-state values that are rarely named literally (a health of 15 is "bleeding").
CONTEXT_CUES: dict[str, Any] = {
    "health": {
        "low": ["bleeding", "wounded", "dying", "badly hurt", "make it quick", "blood", "can barely"],
        "mid": ["wound", "wounds", "hurt", "sting", "i'll live", "injured", "bruised"],
        "high": ["fit as a fiddle", "healthy", "never better", "in fine shape", "unhurt"],
    },
    "behavior_state": {
        "combat": ["fight", "fighting", "battle", "blade", "sword", "attack"],
        "alert": ["eyes peeled", "something's off", "careful", "on guard"],
        "trading": ["customers", "trade", "price", "buy", "sell", "wares"],
        "patrolling": ["rounds", "patrol", "patrolling"],
        "working": ["work", "sparks", "busy", "forge"],
        "resting": ["breather", "rest", "resting"],
        "injured": ["hurt", "injured", "wound"],
        "searching": ["looking for", "search", "searching"],
        "idle": ["spare a word", "not much doing", "quiet"],
        "sleeping": ["sleep", "woke", "asleep"],
        "fleeing": ["run", "flee", "fleeing"],
    },
}


def _health_band(v: float) -> str:
    return "low" if v < 30 else "mid" if v < 70 else "high"


def element_reflected(
    record: Record, element: str, text: str, cues: dict[str, Any], tw: set[str] | None = None
) -> bool:
    """Whether the text reflects one game-state element; ``tw`` (the text's content words) can be passed
    in when several elements of one text are checked."""
    value = record.get(element)
    if value is None:
        return False
    if tw is None:
        tw = set(content_words(text))
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        band = cues.get(element, {})
        return any_phrase(text, band.get(_health_band(float(value)), [])) if isinstance(band, dict) else False
    if isinstance(value, list):
        return any(_value_words(str(v)) & tw for v in value)
    by_value = cues.get(element, {})
    if isinstance(by_value, dict) and any_phrase(text, by_value.get(str(value), [])):
        return True
    return bool(_value_words(str(value)) & tw)


@lru_cache(maxsize=65_536)
def _value_words(value: str) -> frozenset[str]:
    """Content words of a game-state value (values repeat across samples: computed once each)."""
    return frozenset(content_words(value))


class ContextParams(Params):
    elements: list[str]  # the game-state fields whose values the text should reflect
    text_field: str = "response"
    cues: dict[str, Any] = {}  # phrases per element (and per value) beside the built-in ones


@metric("context_coverage", params=ContextParams)
def context_coverage(records: list[Record], p: ContextParams) -> Columns:
    elements, text_field = p.elements, p.text_field
    cues = {**CONTEXT_CUES, **p.cues}
    cols: dict[str, list[Value]] = {f"ctx_{e}": [] for e in elements}
    cov = []
    for r in records:
        text = r.get(text_field) or ""
        tw = set(content_words(text))
        present = [e for e in elements if r.get(e) is not None]
        hits = 0
        for e in elements:
            hit = element_reflected(r, e, text, cues, tw) if r.get(e) is not None else None
            cols[f"ctx_{e}"].append(hit)
            hits += bool(hit)
        cov.append(hits / len(present) if present else None)
    cols["context_coverage"] = list(cov)
    return cols


class PersonaParams(Params):
    keywords_field: str = "persona_keywords"
    persona_field: str = "persona"  # its content words when a sample has no keywords
    text_field: str = "response"


@metric("persona_keyword_overlap", params=PersonaParams)
def persona_keyword_overlap(records: list[Record], p: PersonaParams) -> Columns:
    kw_field, p_field, text_field = p.keywords_field, p.persona_field, p.text_field
    hits_col, share_col = [], []
    for r in records:
        kws = r.get(kw_field) or content_words(r.get(p_field) or "")
        ts = stems(r.get(text_field) or "")
        hits = sorted({k for k in kws if content_stems(k) & ts})
        hits_col.append(json.dumps(hits))
        share_col.append(len(hits) / len(set(kws)) if kws else None)
    return {"persona_keyword_hits": hits_col, "persona_keyword_overlap": share_col}


class DistinctParams(Params):
    n: int | list[int] = [1, 2]
    text_field: str = "response"


@metric("distinct_n", params=DistinctParams)
def distinct_n(records: list[Record], p: DistinctParams) -> Columns:
    ns = p.n if isinstance(p.n, list) else [p.n]
    text_field = p.text_field
    cols: dict[str, list[Value]] = {f"distinct_{n}": [] for n in ns}
    for r in records:
        text = r.get(text_field) or ""
        for n in ns:
            cols[f"distinct_{n}"].append(distinct_of(text, n))  # the text's words are cached (core.text)
    return cols


class RepetitionParams(Params):
    text_field: str = "response"
    n: int = 3


@metric("repetition", params=RepetitionParams)
def repetition(records: list[Record], p: RepetitionParams) -> Columns:
    return {"repetition_rate": [repetition_rate(r.get(p.text_field) or "", p.n) for r in records]}


def _term_score(term: str, text_low: str) -> float:
    t = term.lower().strip()
    if not t:
        return 0.0
    return 100.0 if t in text_low else fuzz.partial_ratio(t, text_low)


class TripleParams(Params):
    triples_field: str = "kg_triples"
    text_fields: list[str] = ["answer"]
    fuzzy_threshold: float = 85


@metric("triple_coverage", params=TripleParams)
def triple_coverage(records: list[Record], p: TripleParams) -> Columns:
    """A triple is covered when its subject and its object both occur in the text (exact, or rapidfuzz
    partial ratio above the threshold)."""
    t_field, fields, threshold = p.triples_field, p.text_fields, p.fuzzy_threshold
    total, covered, share, detail = [], [], [], []
    for r in records:
        triples = r.get(t_field) or []
        low = " ".join(r.get(f) or "" for f in fields).lower()
        rows = []
        for t in triples:
            s, o = _term_score(t.get("subject", ""), low), _term_score(t.get("object", ""), low)
            rows.append(
                {
                    "triple": f"{t.get('subject')} -> {t.get('predicate')} -> {t.get('object')}",
                    "subject": round(s, 1),
                    "object": round(o, 1),
                    "covered": s > threshold and o > threshold,
                }
            )
        n_cov = sum(bool(x["covered"]) for x in rows)
        total.append(len(triples))
        covered.append(n_cov)
        share.append(n_cov / len(triples) if triples else None)
        detail.append(json.dumps(rows, ensure_ascii=False))
    return {"triples_total": total, "triples_covered": covered, "triple_coverage": share, "triple_matches": detail}


class GroundingParams(Params):
    source_field: str = "source_chunk"
    text_field: str = "answer"


@metric("grounding_overlap", params=GroundingParams)
def grounding_overlap(records: list[Record], p: GroundingParams) -> Columns:
    """Share of the answer's content words (stemmed) that occur in the source chunk."""
    src_field, text_field = p.source_field, p.text_field
    # text.overlap, with the source's stems computed once per distinct source chunk
    return {
        "grounding_overlap": [
            stem_share(stems(r.get(text_field) or ""), content_stems(r.get(src_field) or "")) for r in records
        ]
    }
