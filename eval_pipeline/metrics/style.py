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
from typing import Iterable

SPEAKER_PREFIX = re.compile(r"^\s*(?:\{\{\s*char\s*\}\}|\{\{\s*user\s*\}\}|[A-Z][\w .'\-]{0,40}?)\s*:\s+")


def strip_speaker_prefixes(lines: Iterable[str] | str) -> str:
    if isinstance(lines, str):
        lines = lines.splitlines()
    return " ".join(SPEAKER_PREFIX.sub("", line, count=1).strip() for line in lines if line and line.strip())


def char_ngrams(text: str, n: int) -> Counter:
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
