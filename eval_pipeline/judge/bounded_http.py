"""The judge's HTTP client with every answer bounded in size, decoded size included.

The `openai` client reads an answer whole before parsing it, and its HTTP layer decodes a compressed body as it
comes: a 0.5 MB gzip body that decodes to 512 MB, or a 200 answer that never ends, was held in memory (1.8 GB,
193 s). Here the transport decodes ``gzip`` and ``deflate`` itself, counting the decoded bytes, and ends the
answer with a read error past ``MAX_BODY_BYTES`` (the answer is then a missing score with its reason, as any
answer that cannot be used); it asks for no other encoding, and an answer in one (``br``, ``zstd``) is refused. A
redirect is never followed (the client's default), so the key goes to the configured host only.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2

MAX_BODY_BYTES = 8 * 1024 * 1024  # decoded: a judge's answer, even with token log probabilities, is far smaller
ENCODINGS = "gzip, deflate"


class TooLarge(httpx2.ReadError):
    """An answer past the bound."""


class _Decoder:
    """An answer's bytes decoded (``gzip``, ``deflate`` or as they are) and counted: past ``limit`` decoded bytes, a
    ``TooLarge`` (a compressed bomb stops at the limit, never decoded further)."""

    def __init__(self, encoding: str, request: httpx2.Request, limit: int):
        self._request, self._limit, self._encoding, self._size = request, limit, encoding, 0
        wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}.get(encoding)
        self._decoder = zlib.decompressobj(wbits) if wbits is not None else None

    def _too_large(self) -> TooLarge:
        what = f"decoded from {self._encoding} " if self._decoder is not None else ""
        return TooLarge(f"the answer is past {self._limit:,} bytes {what}(read no further)", request=self._request)

    def feed(self, chunk: bytes) -> bytes:
        if self._decoder is None:
            out = chunk
        else:
            # never more than the room left, however much the chunk would decode to (a bomb stops here)
            out = self._decoder.decompress(chunk, self._limit - self._size + 1)
            if self._decoder.unconsumed_tail:
                raise self._too_large()
        self._size += len(out)
        if self._size > self._limit:
            raise self._too_large()
        return out

    def end(self) -> bytes:
        tail = self._decoder.flush() if self._decoder is not None else b""
        self._size += len(tail)
        if self._size > self._limit:
            raise self._too_large()
        return tail


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, raw: httpx2.AsyncByteStream, encoding: str, request: httpx2.Request, limit: int):
        self._raw, self._decoder = raw, _Decoder(encoding, request, limit)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._raw:
            if out := self._decoder.feed(chunk):
                yield out
        if tail := self._decoder.end():
            yield tail

    async def aclose(self) -> None:
        await self._raw.aclose()


class _SyncBounded(httpx2.SyncByteStream):
    def __init__(self, raw: httpx2.SyncByteStream, encoding: str, request: httpx2.Request, limit: int):
        self._raw, self._decoder = raw, _Decoder(encoding, request, limit)

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._raw:
            if out := self._decoder.feed(chunk):
                yield out
        if tail := self._decoder.end():
            yield tail

    def close(self) -> None:
        self._raw.close()


def _encoding(response: httpx2.Response, request: httpx2.Request) -> str:
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip", "deflate"):
        raise httpx2.DecodingError(f"the answer is encoded as {encoding!r}, which was not asked for", request=request)
    return encoding


def _bounded(response: httpx2.Response, request: httpx2.Request, stream: _Bounded | _SyncBounded) -> httpx2.Response:
    """``response`` to ``request`` with its body read through ``stream`` (decoded there: no encoding or length said
    any more)."""
    dropped = ("content-encoding", "content-length")
    return httpx2.Response(
        response.status_code,
        headers=[(k, v) for k, v in response.headers.multi_items() if k.lower() not in dropped],
        stream=stream,
        request=request,
        extensions=response.extensions,
    )


class BoundedTransport(httpx2.AsyncBaseTransport):
    """``httpx2.AsyncHTTPTransport`` whose answers are decoded here and bounded (``MAX_BODY_BYTES``)."""

    def __init__(self, limit: int = MAX_BODY_BYTES, **kwargs: Any):
        self._inner = httpx2.AsyncHTTPTransport(**kwargs)
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = ENCODINGS
        response = await self._inner.handle_async_request(request)
        try:
            encoding = _encoding(response, request)
        except httpx2.DecodingError:
            await response.aclose()
            raise
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return _bounded(response, request, _Bounded(response.stream, encoding, request, self._limit))

    async def aclose(self) -> None:
        await self._inner.aclose()


def bounded_client(**kwargs: Any) -> httpx2.AsyncClient:
    """The `openai` client's default async HTTP client (its time-outs and connection limits) over the bounded
    transport."""
    import openai

    return openai.DefaultAsyncHttpxClient(transport=BoundedTransport(), **kwargs)


class SyncBoundedTransport(httpx2.BaseTransport):
    """The same bound for the synchronous client (judge.batch: files up and down, batches), ``limit`` decoded bytes
    an answer (a Batch output file is read as a stream, line by line, and may be large)."""

    def __init__(self, limit: int = MAX_BODY_BYTES, **kwargs: Any):
        self._inner = httpx2.HTTPTransport(**kwargs)
        self._limit = limit

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = ENCODINGS
        response = self._inner.handle_request(request)
        try:
            encoding = _encoding(response, request)
        except httpx2.DecodingError:
            response.close()
            raise
        assert isinstance(response.stream, httpx2.SyncByteStream)
        return _bounded(response, request, _SyncBounded(response.stream, encoding, request, self._limit))

    def close(self) -> None:
        self._inner.close()


def bounded_sync_client(limit: int = MAX_BODY_BYTES, **kwargs: Any) -> httpx2.Client:
    """The `openai` client's default HTTP client over ``SyncBoundedTransport``; no redirect followed."""
    import openai

    return openai.DefaultHttpxClient(transport=SyncBoundedTransport(limit), **kwargs)
