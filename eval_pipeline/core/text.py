"""Small, dependency-free text helpers shared by metrics and the heuristic judge."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

WORD_RE = re.compile(r"[A-Za-z][A-Za-z'\-]*|\d+(?:[.,]\d+)*")
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
NUMBER_RE = re.compile(r"(?<![A-Za-z])[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[-+]?\d+(?:\.\d+)?")

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "i'm",
        "you're",
        "it's",
        "that's",
        "don't",
        "can't",
        "i'll",
        "i've",
        "we're",
        "they're",
        "isn't",
        "there's",
        "let's",
        "what's",
        "here's",
        "also",
        "one",
        "may",
        "might",
        "must",
        "shall",
        "us",
        "per",
        "via",
        "yes",
        "okay",
        "oh",
        "ah",
        "well",
    ]
)


# Texts tokenised lately, kept for the next metric that reads the same text: compute_metrics runs every metric on
# a block of records at a time (METRIC_BLOCK), so each text is split into words once, not once per metric
TEXT_CACHE = 16_384


@lru_cache(maxsize=TEXT_CACHE)
def words(text: str) -> tuple[str, ...]:
    text = text or ""
    if text.isascii():  # lowering the text first gives the same words (no character outside ASCII turns into one)
        return tuple(WORD_RE.findall(text.lower()))
    return tuple(w.lower() for w in WORD_RE.findall(text))


@lru_cache(maxsize=TEXT_CACHE)
def content_words(text: str, min_len: int = 3) -> tuple[str, ...]:
    return tuple(w for w in words(text) if w not in STOPWORDS and len(w) >= min_len and not w[0].isdigit())


@lru_cache(maxsize=262_144)
def stem(word: str) -> str:
    """NLTK's Snowball (Porter 2) English stem, so 'funds'/'funding'/'funded' meet (no data download needed)."""
    return str(_snowball().stem(word.lower()))


# Optional imports nltk's own modules try (each in a try/except ImportError) that nothing here uses: its
# scikit-learn classifier wrapper and its scipy.stats helpers (Fisher's exact test for collocations, a normal
# distribution for sentence alignment): most of a process's first `import nltk`.
_NLTK_OPTIONAL = ("sklearn", "scipy.stats")


@lru_cache(maxsize=1)
def import_nltk() -> Any:
    """``import nltk``, on first use (paid by every run's process otherwise) and without the optional modules it
    would load for features this package does not use (``_NLTK_OPTIONAL``). Those stay importable afterwards:
    they are hidden only while nltk loads (a thread importing one at that very moment would be told it is not
    installed; steps import nltk on the thread that runs them, before anything else imports either)."""
    import sys

    hidden = [m for m in _NLTK_OPTIONAL if m not in sys.modules]
    for m in hidden:
        sys.modules[m] = None  # type: ignore[assignment]  # what Python reads as "not installed"
    try:
        import nltk
    finally:
        for m in hidden:
            del sys.modules[m]
    return nltk


@lru_cache(maxsize=1)
def _snowball() -> Any:
    import_nltk()
    from nltk.stem.snowball import SnowballStemmer

    return SnowballStemmer("english")


def stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_RE.split(text or "") if s.strip()]


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return list(zip(*(tokens[i:] for i in range(n)), strict=False))


def distinct_n(text: str, n: int) -> float | None:
    grams = ngrams(words(text), n)
    return len(set(grams)) / len(grams) if grams else None


def repetition_rate(text: str, n: int = 3) -> float:
    """Share of word n-grams that repeat an earlier n-gram (0 = no repetition)."""
    grams = ngrams(words(text), n)
    if not grams:
        return 0.0
    counts = Counter(grams)
    return sum(c - 1 for c in counts.values()) / len(grams)


def numbers(text: str) -> list[float]:
    out = []
    for m in NUMBER_RE.findall(text or ""):
        try:
            out.append(float(m.replace(",", "")))
        except ValueError:
            continue
    return out


@lru_cache(maxsize=8192)
def _phrase_re(phrase_low: str) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(phrase_low) + r"(?![A-Za-z0-9])")


def _has_phrase(low: str, phrase: str) -> bool:
    p = phrase.lower()
    # the substring test is necessary for a match and ~50x cheaper than the regex: most phrases stop here
    return p in low and _phrase_re(p).search(low) is not None


def contains_phrase(text: str, phrase: str) -> bool:
    """Case-insensitive phrase match on word boundaries."""
    return _has_phrase((text or "").lower(), phrase)


def any_phrase(text: str, phrases: Iterable[str]) -> bool:
    low = (text or "").lower()
    return any(_has_phrase(low, p) for p in phrases)


def count_phrases(text: str, phrases: Iterable[str]) -> int:
    low = (text or "").lower()
    return sum(_has_phrase(low, p) for p in phrases)


@lru_cache(maxsize=65_536)
def content_stems(text: str) -> frozenset[str]:
    """stems(text), computed once per distinct text (personas, source chunks and keywords repeat)."""
    return frozenset(stems(text))


def stem_share(sa: set[str] | frozenset[str], sb: set[str] | frozenset[str]) -> float | None:
    """|sa ∩ sb| / |sa|; None when sa is empty."""
    return len(sa & sb) / len(sa) if sa else None


def overlap(a: Iterable[str], b: Iterable[str]) -> float | None:
    """|a ∩ b| / |a| over stems; None when a is empty."""
    return stem_share({stem(x) for x in a}, {stem(x) for x in b})


FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: object) -> object:
    """A cell a spreadsheet would run as a formula, made text. Compatibility forms count too: a spreadsheet
    may read a full-width ＝ or ＋ as = and +, so the check is on the NFKC form of the first characters."""
    if isinstance(value, str) and unicodedata.normalize("NFKC", value[:2]).startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def csv_cell(value: object) -> object:
    """A value as a CSV cell for a person's spreadsheet: missing as empty, a float to 15 significant digits (what
    a double holds, without the noise of its last bits), formula-like text neutralised."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return f"{value:.15g}"
    return neutralise(value)
