"""ALMP (Attribute List Match Percentage) of the UWU benchmarks.

Attributes observed in the roleplay scene are matched against the character's
attribute list: an attribute matches when it is in the scene's set (exact,
case-insensitive), else when ``rapidfuzz.fuzz.ratio`` with some scene attribute
is above 85, else when it shares a WordNet synset with some scene attribute
(the whole attribute first, then word by word for multi-word attributes: every
content word must share a synset with a scene word). ALMP = matched / |list|.
Each attribute's rule (exact / fuzzy / synonym / none) and what it matched are kept.

The offline extractor takes the scene's adjectives (words WordNet lists as
adjectives, lemmatised with WordNet's morphology) and hyphenated compounds. With
an LLM judge configured, extraction can be done by the judge instead.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz, process

from eval_pipeline.core import derived_cache
from eval_pipeline.core.params import Params
from eval_pipeline.core.text import STOPWORDS, import_nltk
from eval_pipeline.core.types import Columns, Record, Row
from eval_pipeline.metrics import metric
from eval_pipeline.provision import require_wordnet

TOKEN_RE = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
_WN = None


INDEX_FILES = (
    "index.noun",
    "index.verb",
    "index.adj",
    "index.adv",
    "data.adj",
    "noun.exc",
    "verb.exc",
    "adj.exc",
    "adv.exc",
)


def _index_cache(root: Path) -> Path:
    """Where the reader's parsed indexes are kept, beside the corpus, named after the index files and nltk's
    version: a changed WordNet or nltk gets a new cache, never a stale one."""
    nltk = import_nltk()
    return derived_cache.cache_file(root, ".eval_pipeline_index", [root / f for f in INDEX_FILES], nltk.__version__)


def wordnet() -> Any:
    """WordNet 3.0 from $NLTK_DATA (provisioned from Debian's wordnet-base by `make provision`).

    nltk's reader parses every index file when it is made, in each new process, which every Dagster run
    launched by the daemon is. The parsed indexes (lemma -> part of speech -> synset offsets, the adjective
    satellites, the morphological exceptions) are kept beside the corpus after the first parse and read back
    (marshal: plain dicts, sets and lists; nothing in it runs code; ten times faster than parsing). Parsing and
    loading run with the garbage collector paused: they make about a million small containers it would otherwise
    scan again and again."""
    global _WN
    if _WN is None:
        import gc
        import warnings

        nltk = import_nltk()
        from nltk.corpus.reader.wordnet import WordNetCorpusReader

        root = require_wordnet()
        data_root = str(root.parent.parent)
        if data_root not in nltk.data.path:
            nltk.data.path.insert(0, data_root)
        cache = _index_cache(root)

        class _WordNet30(WordNetCorpusReader):  # type: ignore[misc]  # nltk is untyped
            _parsed = False  # whether the indexes came from the cache (set by the first of the three parses)

            def map_wn(
                self, version: str = "wordnet"
            ) -> None:  # Debian's files ship no index.sense; no OMW mapping needed
                return None

            def _scan_satellites(self) -> None:  # the first of the three parses nltk's __init__ makes
                kept = derived_cache.read(cache)
                if not (isinstance(kept, tuple) and len(kept) == 3):
                    super()._scan_satellites()
                    return
                sat, lemmas, exceptions = kept
                self._parsed = True
                self.satellite_offsets = sat
                self._lemma_pos_offset_map = defaultdict(dict, lemmas)
                self._exception_map = exceptions

            def _load_lemma_pos_offset_map(self) -> None:
                if not self._parsed:
                    super()._load_lemma_pos_offset_map()

            def _load_exception_map(self) -> None:
                if self._parsed:
                    return
                super()._load_exception_map()
                parsed = (self.satellite_offsets, dict(self._lemma_pos_offset_map), self._exception_map)
                derived_cache.write(cache, parsed)  # a read-only corpus folder: parsed again by the next process

        gc.disable()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _WN = _WordNet30(nltk.data.find("corpora/wordnet"), None)
        finally:
            gc.enable()
    return _WN


@lru_cache(maxsize=200_000)
def synset_names(term: str) -> frozenset[str]:
    """Synsets of a term (spaces and hyphens as WordNet's underscores), all parts of speech."""
    key = term.strip().lower().replace(" ", "_")
    names = {s.name() for s in wordnet().synsets(key)}
    if not names and "-" in key:
        names = {s.name() for s in wordnet().synsets(key.replace("-", "_"))}
    return frozenset(names)


@lru_cache(maxsize=200_000)
def _adjective_lemma(word: str) -> str | None:
    w = word.lower()
    if w in STOPWORDS or len(w) < 3:
        return None
    wn = wordnet()
    for pos in ("a", "s"):
        lemma = wn.morphy(w, pos)
        if lemma and wn.synsets(lemma, pos):
            return str(lemma)
    return None


def extract_attributes(text: str) -> list[str]:
    """Offline extractor: the scene's adjectives (lemmatised) and hyphenated compounds, in order, unique."""
    seen: dict[str, None] = {}
    for tok in TOKEN_RE.findall(text or ""):
        if "-" in tok and synset_names(tok):
            seen.setdefault(tok.lower(), None)
            continue
        lemma = _adjective_lemma(tok)
        if lemma:
            seen.setdefault(lemma, None)
    return list(seen)


def _synonym_match(attribute: str, scene: list[str]) -> str | None:
    mine = synset_names(attribute)
    if mine:
        for r in scene:
            if mine & synset_names(r):
                return r
    words = [w for w in re.split(r"[\s\-]+", attribute.lower()) if w and w not in STOPWORDS]
    if len(words) > 1:
        matched = []
        for w in words:
            ws = synset_names(w)
            hit = next((r for r in scene if ws and ws & synset_names(r)), None)
            if hit is None:
                return None
            matched.append(hit)
        return "+".join(matched)
    return None


def match_attribute(attribute: str, scene: list[str], scene_set: set[str], threshold: float = 85) -> Row:
    a = attribute.strip().lower()
    if a in scene_set:
        return {"attribute": attribute, "rule": "exact", "matched": a}
    if scene:
        best = process.extractOne(a, scene, scorer=fuzz.ratio)
        if best and best[1] > threshold:
            return {"attribute": attribute, "rule": "fuzzy", "matched": best[0], "ratio": round(best[1], 1)}
    syn = _synonym_match(a, scene)
    if syn:
        return {"attribute": attribute, "rule": "synonym", "matched": syn}
    return {"attribute": attribute, "rule": "none", "matched": None}


def almp_score(attributes: list[str], scene: list[str], threshold: float = 85) -> tuple[float | None, list[Row]]:
    scene_l = [s.lower() for s in scene]
    scene_set = set(scene_l)
    matches = [match_attribute(a, scene_l, scene_set, threshold) for a in attributes]
    if not attributes:
        return None, matches
    return sum(m["rule"] != "none" for m in matches) / len(attributes), matches


class AlmpParams(Params):
    attributes_field: str = "attributes"
    text_field: str = "response"
    fuzzy_threshold: float = 85
    extracted_field: str | None = None  # attributes extracted by an LLM, when available


@metric("almp", params=AlmpParams)
def almp(records: list[Record], p: AlmpParams) -> Columns:
    a_f, t_f, threshold, extracted_f = p.attributes_field, p.text_field, p.fuzzy_threshold, p.extracted_field
    scores, details, extracted, extractor = [], [], [], []
    for r in records:
        if extracted_f and r.get(extracted_f) is not None:
            scene, how = list(r[extracted_f]), "llm"
        else:
            scene, how = extract_attributes(r.get(t_f) or ""), "offline"
        score, matches = almp_score(list(r.get(a_f) or []), scene, threshold)
        scores.append(score)
        details.append(json.dumps(matches, ensure_ascii=False))
        extracted.append(json.dumps(scene, ensure_ascii=False))
        extractor.append(how)
    return {"almp": scores, "almp_matches": details, "scene_attributes": extracted, "almp_extractor": extractor}


# --- per-row reference implementation (for tests and benchmarks: no caches, no batching) ---------


# long by design: UWU's ALMP matching rules in their published order (exact, fuzzy, synonym, multi-word); the reference
# the batch version is tested against
def almp_reference(attributes: list[str], text: str, threshold: float = 85) -> tuple[float | None, list[Row]]:
    """The same definition, computed row by row in plain Python without any memoisation."""
    wn = wordnet()

    def syns(term: str) -> set[str]:
        key = term.strip().lower().replace(" ", "_")
        names = {s.name() for s in wn.synsets(key)}
        if not names and "-" in key:
            names = {s.name() for s in wn.synsets(key.replace("-", "_"))}
        return names

    scene: list[str] = []
    for tok in TOKEN_RE.findall(text or ""):
        if "-" in tok and syns(tok):
            if tok.lower() not in scene:
                scene.append(tok.lower())
            continue
        w = tok.lower()
        if w in STOPWORDS or len(w) < 3:
            continue
        for pos in ("a", "s"):
            lemma = wn.morphy(w, pos)
            if lemma and wn.synsets(lemma, pos):
                if lemma not in scene:
                    scene.append(lemma)
                break
    matches: list[Row] = []
    for attribute in attributes:
        a = attribute.strip().lower()
        if a in scene:
            matches.append({"attribute": attribute, "rule": "exact", "matched": a})
            continue
        best, best_score = None, -1.0
        for r in scene:
            sc = fuzz.ratio(a, r)
            if sc > best_score:
                best, best_score = r, sc
        if best is not None and best_score > threshold:
            matches.append({"attribute": attribute, "rule": "fuzzy", "matched": best, "ratio": round(best_score, 1)})
            continue
        mine = syns(a)
        hit = next((r for r in scene if mine & syns(r)), None) if mine else None
        if hit is None:
            words = [w for w in re.split(r"[\s\-]+", a) if w and w not in STOPWORDS]
            if len(words) > 1:
                parts: list[str] = []
                for w in words:
                    ws = syns(w)
                    h = next((r for r in scene if ws and ws & syns(r)), None)
                    if h is None:
                        parts = []
                        break
                    parts.append(h)
                hit = "+".join(parts) if parts else None
        if hit is not None:
            matches.append({"attribute": attribute, "rule": "synonym", "matched": hit})
        else:
            matches.append({"attribute": attribute, "rule": "none", "matched": None})
    if not attributes:
        return None, matches
    return sum(m["rule"] != "none" for m in matches) / len(attributes), matches
