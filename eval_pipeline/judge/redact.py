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


def redact_tokens(tokens: list[Any] | None, secret: str | None = None) -> list[Any] | None:
    """Token log probabilities (``[[token, [[alternative, logprob], ...]], ...]``) without a key split over
    tokens, plainly or in JSON escapes: where the tokens joined hold a key, every token of it (and its
    alternatives) becomes ``***``."""
    if not tokens:
        return tokens
    texts = [str(t[0]) for t in tokens]
    joined = "".join(texts)
    if redact(joined, secret) == joined:  # the usual case: nothing shaped like a key anywhere
        return tokens
    decoded, offsets = _decoded_with_offsets(joined)
    found = [(m.start(), m.end()) for m in KEY_RE.finditer(decoded)]
    for form in secret_forms(secret) if secret else ():
        start = decoded.find(form)
        while start >= 0:
            found.append((start, start + len(form)))
            start = decoded.find(form, start + 1)
    spans = [(offsets[a], offsets[b]) for a, b in found]  # in the joined tokens' own characters
    out: list[Any] = []
    pos = 0
    for token, text in zip(tokens, texts):
        end = pos + len(text)
        hit = any(a < end and pos < b for a, b in spans) or redact(text, secret) != text
        out.append(["***", [["***", alt[1]] for alt in token[1]]] if hit else token)
        pos = end
    return out
