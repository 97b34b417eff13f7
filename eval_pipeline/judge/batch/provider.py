"""The provider's Files and Batches API through the `openai` client's own ``files`` and ``batches`` resources: upload
an input file, create a batch, find what an earlier process submitted (by the file's name, by the batch's
metadata), ask how batches stand, cancel one, and read a result file line by line.

Every answer is bounded in size as the online client's are (judge.bounded_http); a result file is read as a stream,
one line at a time, each line bounded, so a large file never sits in memory whole. No redirect is followed: the key
goes to the configured host only. Every HTTP request is counted (``requests``), the figure the benchmark reports.
Everything of a provider's answer that is kept is made safe here first (``_said``), whatever a provider echoes:
what a batch says in words (its errors' codes, messages, parameters) has the API key and control characters taken
out; an id or a state (a batch's, a file's) is used only when it is one: printable, at most ``ID_CHARS``
characters, without the key; otherwise the answer is ``Unusable`` (its batch is not waited on: judge.batch marks it
failed with the reason) and the id is stored and printed nowhere.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from eval_pipeline.core import settings as env_settings
from eval_pipeline.judge.bounded_http import MAX_BODY_BYTES, bounded_sync_client
from eval_pipeline.judge.redact import redact, secret_forms

if TYPE_CHECKING:
    from openai.types import Batch

SUBMISSION = "eval_pipeline_submission"  # the batch metadata key naming our submission (resuming finds it by this)
RESULT_FILE_BYTES = 64 * 1024**3  # a result file is read as a stream; this bounds an endless one
LIST_PAGES = 50  # at most this many pages (100 batches or 10,000 files each) are searched for a lost record
ENDPOINT: Final = "/v1/chat/completions"
FILE_READ_S = 900.0  # a result file read for longer than this is cut (its unread prompts are asked again)
ID_CHARS = 200  # an id (a batch's, a file's) or a state longer than this is not one
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]*")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


class Unusable(Exception):
    """The provider answered with an id or a state that is not one (control characters, the key, too long): the
    answer is not used, and its words say so without repeating it."""


@dataclass
class FileBound:
    """How much of a result file is read at most: ``lines`` lines, ``size`` bytes, ``seconds`` seconds; ``cut``
    says why the reading stopped, when it did."""

    lines: int
    size: int
    seconds: float = FILE_READ_S
    cut: str | None = None

    @classmethod
    def asked(cls, n: int) -> FileBound:
        """The bound of a file answering ``n`` prompts: each a line of at most MAX_BODY_BYTES, and as many again of
        lines no prompt asked for."""
        return cls(lines=2 * n + 100, size=(2 * n + 100) * MAX_BODY_BYTES)

    def past(self, lines: int, size: int, seconds: float) -> str | None:
        if lines > self.lines:
            return f"the result file went on past {self.lines} lines: read no further"
        if size > self.size:
            return f"the result file went on past {self.size} bytes: read no further"
        if seconds > self.seconds:
            return f"the result file took more than {self.seconds:.0f} s to read: read no further"
        return None


class Provider:
    """One endpoint's Files and Batches API (``base_url``: the judge's; the key from OPENAI_API_KEY)."""

    def __init__(self, base_url: str | None, timeout_s: float = 60.0):
        import openai

        self.key = env_settings.openai_api_key()
        self.requests = 0

        def counted(request: Any) -> None:
            self.requests += 1

        self._http = bounded_sync_client(RESULT_FILE_BYTES, event_hooks={"request": [counted]})
        self.client = openai.OpenAI(
            api_key=self.key or "not-needed",
            base_url=base_url,
            timeout=timeout_s,
            max_retries=3,
            http_client=self._http,
        )

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Provider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _id(self, text: object, what: str) -> str:
        """``text`` when it is an id (``_ID_RE``, at most ``ID_CHARS``, not holding the key); else ``Unusable``."""
        if (
            isinstance(text, str)
            and len(text) <= ID_CHARS
            and _ID_RE.fullmatch(text)
            and not (self.key and any(f in text for f in secret_forms(self.key)))
        ):
            return text
        size = len(text) if isinstance(text, str) else 0
        raise Unusable(f"the provider's {what} is not an id (printable, at most {ID_CHARS} characters): {size} chars")

    def _words(self, text: str) -> str:
        """What a provider says in words, safe to store and print: no key, no control characters, at most 500."""
        return _CONTROL_RE.sub(" ", redact(text, self.key or None))[:500]

    def upload(self, name: str, data: bytes) -> str:
        """The id of ``data`` uploaded as the Batch input file ``name``."""
        return self._id(self.client.files.create(file=(name, data, "application/jsonl"), purpose="batch").id, "file id")

    def find_file(self, name: str) -> str | None:
        """The id of an uploaded Batch input file called ``name`` (an upload whose answer was lost), if any."""
        page = self.client.files.list(purpose="batch", limit=10000)
        for _ in range(LIST_PAGES):
            for f in page.data:
                if f.filename == name:
                    return self._id(f.id, "file id")
            if not page.has_next_page():
                return None
            page = page.get_next_page()
        return None

    def _said(self, batch: Batch) -> Batch:
        """``batch`` safe to keep: its ids and state checked (``Unusable`` when one is not an id), what it says in
        words (each error's code, message and parameter: a failed batch's ``errors.data``) without the key or
        control characters, as a provider may echo the request's key anywhere."""
        self._id(batch.id, "batch id")
        self._id(batch.status, "batch state")
        for field in ("input_file_id", "output_file_id", "error_file_id"):
            if getattr(batch, field, None) is not None:
                self._id(getattr(batch, field), field.replace("_", " "))
        errors = getattr(batch, "errors", None)
        for error in getattr(errors, "data", None) or []:
            for field in ("code", "message", "param"):
                text = getattr(error, field, None) if error is not None else None
                if isinstance(text, str):
                    setattr(error, field, self._words(text))
        return batch

    def create(self, file_id: str, window: str, submission_id: str) -> Batch:
        return self._said(
            self.client.batches.create(
                input_file_id=file_id,
                endpoint=ENDPOINT,
                completion_window=window,  # type: ignore[arg-type]  # a provider may offer more than OpenAI's "24h"
                metadata={SUBMISSION: submission_id},
            )
        )

    def find_batch(
        self, submission_id: str, input_file_id: str | None = None, batch_id: str | None = None
    ) -> Batch | None:
        """The batch created for ``submission_id`` (a creation whose answer was lost; a batch a retrieve did not
        find), if the provider's list holds it: by its id, by the metadata naming the submission, or by its input
        file (a provider that keeps no metadata still keeps which file a batch reads: one file, one batch)."""
        for batch in self._batches():
            if (
                (batch_id is not None and batch.id == batch_id)
                or (batch.metadata or {}).get(SUBMISSION) == submission_id
                or (input_file_id is not None and batch.input_file_id == input_file_id)
            ):
                return self._said(batch)
        return None

    def _batches(self) -> Iterator[Batch]:
        page = self.client.batches.list(limit=100)
        for _ in range(LIST_PAGES):
            yield from page.data
            if not page.has_next_page():
                return
            page = page.get_next_page()

    def retrieve(self, batch_id: str) -> Batch | None:
        """How the batch stands; None when the provider no longer knows it."""
        import openai

        try:
            return self._said(self.client.batches.retrieve(batch_id))
        except openai.NotFoundError:
            return None

    def standing(self, batch_ids: set[str]) -> dict[str, Batch | None]:
        """How each of ``batch_ids`` stands, from as few requests as possible: the batch list (newest first, 100 a
        page) while it holds batches still to find, then one request each for the rest (None: unknown)."""
        out: dict[str, Batch | None] = {}
        if len(batch_ids) > 1:
            page = self.client.batches.list(limit=100)
            for _ in range(LIST_PAGES):
                out.update({b.id: self._safe(b) for b in page.data if b.id in batch_ids})
                if len(out) == len(batch_ids) or not page.has_next_page():
                    break
                page = page.get_next_page()
        for batch_id in batch_ids - set(out):
            try:
                out[batch_id] = self.retrieve(batch_id)
            except Unusable:
                out[batch_id] = None
        return out

    def _safe(self, batch: Batch) -> Batch | None:
        """``_said``'s batch, or None when it is unusable (a run then looks at it and says why)."""
        try:
            return self._said(batch)
        except Unusable:
            return None

    def cancel(self, batch_id: str) -> Batch:
        return self._said(self.client.batches.cancel(batch_id))

    def lines(
        self, file_id: str, line_limit: int = MAX_BODY_BYTES, bound: FileBound | None = None
    ) -> Iterator[bytes | None]:
        """A result file's lines as they arrive; a line past ``line_limit`` bytes is given as None (read no further
        into it). With ``bound``, the reading stops, said in ``bound.cut``, past its lines, bytes or seconds: a
        file that never ends (a hostile or broken provider) costs a bounded read, never a hung run."""
        started, count, size = time.monotonic(), 0, 0
        with self.client.files.with_streaming_response.content(file_id) as response:
            held, skipping = bytearray(), False
            for chunk in response.iter_bytes():
                size += len(chunk)
                if bound is not None and (why := bound.past(count, size, time.monotonic() - started)):
                    bound.cut = why
                    return
                count += chunk.count(b"\n")
                while chunk:
                    cut = chunk.find(b"\n")
                    part, chunk = (chunk, b"") if cut < 0 else (chunk[:cut], chunk[cut + 1 :])
                    if not skipping:
                        held += part
                        if len(held) > line_limit:
                            held, skipping = bytearray(), True
                    if cut >= 0:
                        if skipping:
                            yield None
                        elif held.strip():
                            yield bytes(held)
                        held, skipping = bytearray(), False
            if skipping:
                yield None
            elif held.strip():
                yield bytes(held)


def standing_of(
    subs: Sequence[Mapping[str, Any]], timeout_s: float = 30.0
) -> tuple[dict[str, Batch | None], list[str]]:
    """How the batches of ``subs`` (submissions with a ``batch_id``) stand now, each endpoint (``base_url``) asked
    with as few requests as it takes (``Provider.standing``): batch id -> the batch (None: not found, or unusable),
    and one line per endpoint that could not be asked (redacted; its batches are left out)."""
    by_endpoint: dict[str, set[str]] = {}
    for sub in subs:
        if sub.get("batch_id"):
            by_endpoint.setdefault(str(sub.get("base_url") or ""), set()).add(str(sub["batch_id"]))
    found: dict[str, Batch | None] = {}
    unreachable: list[str] = []
    for base_url, ids in by_endpoint.items():
        try:
            with Provider(base_url or None, timeout_s) as provider:
                found.update(provider.standing(ids))
        except Exception as exc:  # noqa: BLE001 - an endpoint down now is asked again at the next look
            said = f"{base_url or 'api.openai.com'}: {exc}"
            unreachable.append(redact(said, env_settings.openai_api_key() or None)[:300])
    return found, unreachable
