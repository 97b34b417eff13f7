"""Keeping the API key out of everything an endpoint sends back: answers, refusals, error messages and token log
probabilities are stored, logged or shown, so each passes through here first. The configured key is removed in
every form an endpoint might echo it (plain, URL-quoted, base64, hex, JSON escapes), and so is anything shaped like
a key."""

from __future__ import annotations

import functools
import re
from typing import Any

KEY_RE = re.compile(r"(sk-|key-|Bearer\s+)[A-Za-z0-9_\-\.]{4,}")


@functools.lru_cache(maxsize=8)
def secret_forms(secret: str) -> tuple[str, ...]:
    """The configured key as an endpoint might echo it back: as is, URL-quoted, in base64 (standard and URL-safe,
    with and without padding) and in hex, longest first (worked out once per key: every answer is redacted)."""
    import base64
    from urllib.parse import quote

    raw = secret.encode()
    forms = {secret, quote(secret, safe=""), raw.hex()}
    for enc in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        forms |= {enc, enc.rstrip("=")}
    return tuple(sorted((f for f in forms if len(f) >= 8), key=len, reverse=True))


# JSON escapes that spell a printable character other than a quote or backslash (``\u0073``, ``\/``): decoded
# before redaction, so a key an endpoint wrote with escapes cannot survive to be decoded by a JSON parser later
# (the text stays valid JSON: the characters that must stay escaped are left as they are)
_ESCAPE_RE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(/)|\\)")  # an escaped backslash is read as one, kept


def _plain(m: re.Match[str]) -> str:
    """One escape as the character it spells, or as it is (see ``_ESCAPE_RE``)."""
    if m.group(2):
        return "/"
    if m.group(1) is None:
        return m.group(0)
    c = chr(int(m.group(1), 16))
    return c if c.isprintable() and c not in '"\\' and not 0xD800 <= ord(c) <= 0xDFFF else m.group(0)


def _plain_escapes(text: str) -> str:
    return _ESCAPE_RE.sub(_plain, text)


def redact(text: str, secret: str | None = None) -> str:
    """``text`` without the configured key (``secret``, in any of ``secret_forms``) and without anything shaped
    like a key (``sk-...``, ``key-...``, a bearer token), whether written plainly or with JSON escapes."""
    if "\\" in text:
        text = _plain_escapes(text)
    if secret:
        for form in secret_forms(secret):
            text = text.replace(form, "***")
    return KEY_RE.sub(lambda m: m.group(1) + "***", text)


def _decoded_with_offsets(text: str) -> tuple[str, list[int]]:
    """``_plain_escapes(text)`` and, for each of its characters and one past the end, where it starts in ``text``."""
    out: list[str] = []
    offsets: list[int] = []
    pos = 0
    for m in _ESCAPE_RE.finditer(text):
        out.append(text[pos : m.start()] + _plain(m))
        offsets += [*range(pos, m.start()), *[m.start()] * len(out[-1][m.start() - pos :])]
        pos = m.end()
    out.append(text[pos:])
    offsets += [*range(pos, len(text) + 1)]
    return "".join(out), offsets


FRAGMENT = 4  # a token or alternative this long or longer that is a piece of the configured key is removed


def _spans(texts: list[str], secret: str | None) -> list[tuple[int, int]]:
    """Where, in ``texts`` joined, a key shows (``secret`` in any form, or anything shaped like a key), plainly or
    in JSON escapes, in the joined texts' own characters."""
    joined = "".join(texts)
    decoded, offsets = _decoded_with_offsets(joined) if "\\" in joined else (joined, list(range(len(joined) + 1)))
    runs = _runs_of(decoded, secret) if secret else []
    if not runs and redact(joined, secret) == joined:  # the usual case: nothing shaped like a key anywhere
        return []
    found = [(m.start(), m.end()) for m in KEY_RE.finditer(decoded)] + runs
    for form in secret_forms(secret) if secret else ():
        start = decoded.find(form)
        while start >= 0:
            found.append((start, start + len(form)))
            start = decoded.find(form, start + 1)
    return [(offsets[a], offsets[b]) for a, b in found]


RUN = 8  # this many characters of the configured key in a row, anywhere, count as the key


@functools.lru_cache(maxsize=8)
def _grams(secret: str) -> frozenset[str]:
    return frozenset(secret[i : i + RUN] for i in range(len(secret) - RUN + 1))


def _runs_of(text: str, secret: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are ``RUN`` or more characters in a row of ``secret`` (a part of the key, however it
    was cut into tokens), one per window of ``RUN`` characters found in the key (a set lookup per position)."""
    if len(secret) < RUN or len(text) < RUN:
        return []
    grams = _grams(secret)
    return [(i, i + RUN) for i in range(len(text) - RUN + 1) if text[i : i + RUN] in grams]


def _hit_positions(texts: list[str], secret: str | None) -> set[int]:
    """The positions of ``texts`` that carry part of a key found in them joined."""
    spans = _spans(texts, secret)
    hits: set[int] = set()
    pos = 0
    for i, text in enumerate(texts):
        end = pos + len(text)
        if any(a < end and pos < b for a, b in spans):
            hits.add(i)
        pos = end
    return hits


def _is_secret(text: str, secret: str | None) -> bool:
    """A token on its own that holds a key, or is a piece of the configured one."""
    if redact(text, secret) != text:
        return True
    return secret is not None and bool(secret) and len(text.strip()) >= FRAGMENT and text.strip() in secret


def redact_tokens(tokens: list[Any] | None, secret: str | None = None) -> list[Any] | None:
    """Token log probabilities (``[[token, [[alternative, logprob], ...]], ...]``) without a key anywhere in them:
    a token or alternative that holds a key or a piece of the configured one, the tokens of a key split over the
    answer, and the alternatives of a key split over the same rank of alternatives (the second likeliest token
    at each position, and so on) become ``***``; an answer position whose token is removed loses its alternatives
    too."""
    if not tokens:
        return tokens
    chosen = [str(t[0]) for t in tokens]
    alts = [[str(a[0]) for a in (t[1] or [])] for t in tokens]
    hit_tokens = _hit_positions(chosen, secret) | {i for i, t in enumerate(chosen) if _is_secret(t, secret)}
    hit_alts: set[tuple[int, int]] = set()
    for rank in range(max((len(a) for a in alts), default=0)):
        texts = [a[rank] if rank < len(a) else "" for a in alts]
        hit_alts |= {(i, rank) for i in _hit_positions(texts, secret)}
    hit_alts |= {(i, k) for i, a in enumerate(alts) for k, text in enumerate(a) if _is_secret(text, secret)}
    if not hit_tokens and not hit_alts:
        return tokens
    out: list[Any] = []
    for i, token in enumerate(tokens):
        if i in hit_tokens:
            out.append(["***", [["***", alt[1]] for alt in token[1]]])
            continue
        kept = [["***", alt[1]] if (i, k) in hit_alts else alt for k, alt in enumerate(token[1] or [])]
        out.append([token[0], kept])
    return out
