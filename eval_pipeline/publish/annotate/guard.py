"""Who may reach the annotate app and what a request may carry: a loopback address without a token, a token past it (at
least MIN_TOKEN characters), the Host header, the signing key kept beside the ratings, and forms read within bounds
(FormRefused: nothing written)."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from pathlib import Path
from urllib.parse import parse_qs

from starlette.requests import Request

from eval_pipeline.publish.annotate.files import atomic_write


class AnnotateRefused(Exception):
    """The app cannot start as asked (bound past loopback without a token)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


MIN_TOKEN = 16  # characters of EVAL_ANNOTATE_TOKEN for an address others can reach


def check_binding(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise AnnotateRefused(
            f"annotate on {host} would let anyone who reaches it write ratings: set EVAL_ANNOTATE_TOKEN (every "
            "request must then carry it), or serve on 127.0.0.1"
        )
    if not is_loopback(host) and token is not None and len(token) < MIN_TOKEN:
        raise AnnotateRefused(
            f"EVAL_ANNOTATE_TOKEN is {len(token)} character(s): at least {MIN_TOKEN} for an address others can "
            "reach (e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))')"
        )


def same(a: str, b: str) -> bool:
    """A constant-time comparison of two texts, any characters (hmac.compare_digest refuses non-ASCII str)."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def index_of(value: object) -> int:
    """A checklist item's index from a form field (ASCII digits only: ``²`` is a digit to str.isdigit, not to
    int); -1 for anything else."""
    text = str(value)
    return int(text) if text.isascii() and text.isdecimal() else -1


def host_name(header: str) -> str:
    """The name of a Host header without its port (``[::1]:8766`` -> ``::1``)."""
    h = header.strip()
    if h.startswith("["):
        return h[1:].split("]", 1)[0]
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def bearer(header: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header, the scheme in any case (RFC 7235)."""
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def secret_key(root: Path) -> bytes:
    """The key sessions are signed with, kept beside the ratings (sessions survive a restart)."""
    path = root / ".annotate" / "secret"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        key = secrets.token_bytes(32)
        atomic_write(path, key, mode=0o600)  # the key: for this user alone
        return path.read_bytes()


class FormRefused(Exception):
    """A posted form this app will not read: too large, or too many fields. Answered in one line, nothing written."""

    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status, self.text = status, text


MAX_FORM_FIELDS = 2000


class Form:
    """A posted URL-encoded form (this app's pages post nothing else), read without python-multipart."""

    def __init__(self, body: bytes):
        try:
            fields = parse_qs(
                body.decode("utf-8", errors="replace"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS
            )
        except ValueError:  # past max_num_fields
            raise FormRefused(
                413, f"refused: the form has more than {MAX_FORM_FIELDS} fields; nothing was written"
            ) from None
        self._fields = fields

    def get(self, name: str, default: str = "") -> str:
        values = self._fields.get(name)
        return values[-1] if values else default

    def getlist(self, name: str) -> list[str]:
        return list(self._fields.get(name, []))


MAX_FORM_BYTES = 1_000_000


async def form_of(request: Request) -> Form:
    """The posted form, read no further than ``MAX_FORM_BYTES``: a larger declared length is refused before a
    byte of the body is read, a longer stream as soon as it passes the limit (it is never held whole)."""
    too_large = FormRefused(413, f"refused: a form larger than {MAX_FORM_BYTES:,} bytes; nothing was written")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise too_large
        chunks.append(chunk)
    return Form(b"".join(chunks))
