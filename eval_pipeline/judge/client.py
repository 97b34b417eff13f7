"""The LLM judge client: the `openai` package against any OpenAI-compatible endpoint.

Configured by one judge's ``JudgeSettings`` (judge.config: endpoint, model, sampling, call policy); the key is
read from OPENAI_API_KEY when a client is made. Temperature 0 and a fixed seed by default. Async with a
concurrency limit; bounded retries with exponential backoff and full jitter
that honour Retry-After on 429; per-call timeouts. Structured output is asked
for with a JSON schema; an endpoint that rejects `response_format` is asked
again without it (the prompt itself spells out the JSON form). Token usage and
latency are recorded per call. The API key never appears in a reason or log.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import math
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from eval_pipeline.core import settings as env_settings
from eval_pipeline.core.types import JSONObject
from eval_pipeline.judge import costs
from eval_pipeline.judge.config import JudgeSettings

if TYPE_CHECKING:  # imported where a client is made: the openai package costs ~0.4 s to import, paid by every
    import openai  # run's process that loads the definitions, most of which never call an endpoint

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


@dataclass
class CallResult:
    text: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 0
    logprobs: list[Any] | None = None  # [[token, [[alternative, logprob], ...]], ...] when asked and returned
    truncated: bool = False  # the endpoint stopped at max_tokens (finish_reason "length")
    not_asked: bool = False  # never sent: the run's budget would not cover it


@dataclass
class ClientStats:
    calls: int = 0
    http_attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: list[float] = field(default_factory=list)
    max_in_flight: int = 0
    processes: int = 1
    timeout_cuts: int = 0  # how often a time-out halved the calls in flight (an endpoint slower than asked of it)
    timeout_extensions: int = 0  # how often calls in flight past their time-out were given twice as long instead
    start_concurrency: int = 0  # calls allowed in flight at the start (what an earlier client learnt, else config)
    start_timeout_s: float = 0.0
    final_concurrency: int = 0  # calls allowed in flight when the batch ended (0: never cut)

    def add(self, other: ClientStats) -> None:
        """Fold in another client's counts (a worker's, or the re-ask pass); peaks add up to an upper bound."""
        self.calls += other.calls
        self.http_attempts += other.http_attempts
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.max_in_flight += other.max_in_flight
        self.latency_ms += other.latency_ms
        self.timeout_cuts += other.timeout_cuts
        self.timeout_extensions += other.timeout_extensions
        self.final_concurrency = max(self.final_concurrency, other.final_concurrency)
        self.start_concurrency = max(self.start_concurrency, other.start_concurrency)
        self.start_timeout_s = max(self.start_timeout_s, other.start_timeout_s)


def _retry_after_seconds(exc: openai.APIStatusError) -> float | None:
    headers = getattr(exc.response, "headers", None) or {}
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000
            if math.isfinite(value):
                return max(0.0, value)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        seconds = float(ra)
    except ValueError:  # an HTTP date, or something else a proxy made up ("soon", "30s"): then our own backoff
        try:
            parsed = email.utils.parsedate_to_datetime(ra)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if parsed.tzinfo is None:
            return None
        seconds = parsed.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


# The longest answer text read: a rubric's answer is scores and a rationale the schema bounds (600 characters);
# a larger one is a missing score with its reason, so neither judge_scores nor the cache holds megabytes.
MAX_ANSWER_CHARS = 64 * 1024


TIMEOUT_GROWTH = 4  # a call's time-out grows (doubling on time-outs) to at most this many times EVAL_JUDGE_TIMEOUT


_GIVEN_UP = object()  # what a POST returns when the endpoint was given up on while it was in flight


def _quiet(future: asyncio.Future[Any]) -> None:
    """Retrieve a cancelled POST's outcome, so asyncio does not report it as never retrieved."""
    if not future.cancelled():
        future.exception()


class _NotJSON(ValueError):
    """A 200 answer whose body is not a JSON object."""


def _token_logprobs(block: Any) -> list[Any] | None:
    """The answer's tokens with their top alternatives, compact: [[token, [[alt, logprob], ...]], ...]."""
    content = block.get("content") if isinstance(block, dict) else None
    if not isinstance(content, list):
        return None
    out = []
    for t in content:
        if not isinstance(t, dict) or not isinstance(t.get("token"), str):
            return None
        alts = [
            [a["token"], float(a["logprob"])]
            for a in (t.get("top_logprobs") or [])
            if isinstance(a, dict) and isinstance(a.get("token"), str) and isinstance(a.get("logprob"), int | float)
        ]
        if not alts and isinstance(t.get("logprob"), int | float):
            alts = [[t["token"], float(t["logprob"])]]
        out.append([t["token"], alts])
    return out


MAX_TOKENS_A_CALL = 10**8  # no request's prompt or answer is this long: a larger count is not a count


def _int(value: Any) -> int:
    """A token count as the endpoint reports it; anything that is not a plausible count (text, NaN, 1e400, 10**14,
    negative) counts as 0."""
    try:
        n = int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0
    return n if 0 <= n < MAX_TOKENS_A_CALL else 0


def _schema_unsupported(exc: openai.BadRequestError) -> bool:
    msg = str(exc).lower()
    return any(w in msg for w in ("response_format", "json_schema", "structured output", "schema"))


@dataclass
class Learnt:
    """What clients learnt about one endpoint and model: how many calls in flight it serves, how long an answer
    takes. Kept for the process, so the next step, rubric or checkpoint starts there instead of at the configured
    values (which a slow server had already shown to be too much)."""

    limit: int
    timeout_s: float


_LEARNT: dict[tuple[str, str], Learnt] = {}
_LEARNT_LOCK = threading.Lock()


def learnt(endpoint: str, model: str) -> Learnt | None:
    with _LEARNT_LOCK:
        return _LEARNT.get((endpoint, model))


def forget_endpoints() -> None:
    """Start from the configured values again (a test, or a server restarted with more slots)."""
    with _LEARNT_LOCK:
        _LEARNT.clear()
        _ADVERTISED.clear()


_ADVERTISED: dict[str, int | None] = {}
HOSTED = ("openai.com", "azure.com", "anthropic.com", "googleapis.com")  # no capacity endpoint: never probed


def advertised_slots(endpoint: str, api_key: str | None = None) -> int | None:
    """How many requests the server says it serves at once, asked once per endpoint and process: llama.cpp's
    ``GET /props`` (``total_slots``, the ``-np`` it was started with) beside the ``/v1`` base URL. None when it
    says nothing (another server, a hosted API, no answer within 2 s)."""
    with _LEARNT_LOCK:
        if endpoint in _ADVERTISED:
            return _ADVERTISED[endpoint]
    slots: int | None = None
    parts = urlsplit(endpoint)
    if parts.scheme in ("http", "https") and not (parts.hostname or "").endswith(HOSTED):
        import urllib.request

        root = endpoint[: -len("/v1")] if endpoint.endswith("/v1") else endpoint
        request = urllib.request.Request(root + "/props")
        if api_key:
            request.add_header("Authorization", f"Bearer {api_key}")
        try:
            with urllib.request.urlopen(request, timeout=2) as r:
                body = json.loads(r.read(65536))
            value = body.get("total_slots") if isinstance(body, dict) else None
            slots = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        except (OSError, ValueError):
            slots = None
    with _LEARNT_LOCK:
        _ADVERTISED[endpoint] = slots
    return slots


class OpenAIJudgeClient:
    """One judge (model + endpoint). Create inside the event loop that uses it. It starts from what earlier clients
    of this process learnt about the same endpoint and model (``learnt``), never past the configured concurrency
    (which ``judge.calls.call_specs`` caps at the slots the server advertises)."""

    def __init__(self, settings: JudgeSettings, api_key: str | None = None):
        self.settings = settings
        self._api_key = api_key if api_key is not None else env_settings.openai_api_key()
        base_url = settings.base_url
        import openai

        self._client = openai.AsyncOpenAI(
            api_key=self._api_key or "not-needed",
            base_url=base_url,
            timeout=settings.timeout_s * TIMEOUT_GROWTH,  # each call is bounded by ours (wait_for), which grows
            max_retries=0,  # retries are ours: bounded, jittered, Retry-After aware
        )
        # adaptive: calls in flight at most ``_limit`` (halved when a call times out, one more per ``_limit``
        # answers, never past the configured concurrency); the time-out doubles when calls time out, up to
        # TIMEOUT_GROWTH times the configured one. A slow server (few slots, long answers) then converges on what
        # it can serve instead of every call being cut and asked again from the start.
        self._limit = max(1, settings.concurrency)
        self._timeout = settings.timeout_s
        self._key = (settings.endpoint(), settings.model)
        known = learnt(*self._key)
        if known is not None:  # where the last client of this endpoint settled
            self._limit = max(1, min(self._limit, known.limit))
            self._timeout = min(settings.timeout_s * TIMEOUT_GROWTH, max(settings.timeout_s, known.timeout_s))
        self._epoch = 0  # bumped at each cut: a time-out of a call started before it does not cut again
        self._answered_since_change = 0
        self._ever_answered = False
        self._last_answer = 0.0  # when the last answer came (time.perf_counter)
        self._newest_answered = 0.0  # when the most recently sent of the answered attempts was sent
        self._gate = asyncio.Condition()
        self._use_schema = True
        self._in_flight = 0
        self._flights: Counter[int] = Counter()  # calls in flight by the epoch they started in
        self._unreachable_in_a_row = 0
        self._down: str | None = None  # why the endpoint was given up on (the circuit breaker)
        # done with _down: the calls in flight stop waiting for their answers (made in the loop, at the first POST)
        self._tripped: asyncio.Future[None] | None = None
        self._budget = costs.current()  # the run's budget (EVAL_JUDGE_BUDGET), drawn on request by request
        self.stats = ClientStats()
        self.stats.start_concurrency, self.stats.start_timeout_s = self._limit, self._timeout

    def _remember(self) -> None:
        with _LEARNT_LOCK:
            _LEARNT[self._key] = Learnt(self._limit, self._timeout)

    async def close(self) -> None:
        await self._client.close()

    def _may_enter(self) -> bool:
        """A call may start: under the limit and, while the endpoint has never answered, not before every call of an
        earlier epoch has ended (a wave is judged whole before the next one starts: an endpoint that never answers
        is given up in its second wave, with no call of a third one made in between)."""
        if self._down is not None:
            return True  # to leave at once
        if self._in_flight >= self._limit:
            return False
        return self._ever_answered or not any(n for e, n in self._flights.items() if e < self._epoch)

    async def _enter(self) -> int:
        async with self._gate:
            await self._gate.wait_for(self._may_enter)
            self._in_flight += 1
            self._flights[self._epoch] += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self._in_flight)
            return self._epoch

    def _gate_wakeup(self) -> None:
        """Wake every call waiting its turn (they find the endpoint given up and leave without an attempt)."""

        async def wake() -> None:
            async with self._gate:
                self._gate.notify_all()

        asyncio.ensure_future(wake())

    async def _leave(self, epoch: int) -> None:
        async with self._gate:
            self._in_flight -= 1
            self._flights[epoch] -= 1
            self._gate.notify_all()

    def _timed_out(self, epoch: int) -> bool:
        """A call started in ``epoch`` timed out: the first of its epoch halves the limit and doubles the time-out.
        True when it counts toward the circuit breaker (it ran under the current limit and time-out)."""
        if epoch != self._epoch:
            return False
        self._limit = max(1, self._limit // 2)
        self._grow_timeout()
        self._epoch += 1
        self._answered_since_change = 0
        self.stats.timeout_cuts += 1
        self.stats.final_concurrency = self._limit
        self._remember()
        return True

    def _answered(self, sent: float | None = None) -> None:
        """An attempt sent at ``sent`` (time.perf_counter; default: now) was answered."""
        self._ever_answered = True
        self._last_answer = time.perf_counter()
        self._newest_answered = max(self._newest_answered, self._last_answer if sent is None else sent)
        self._answered_since_change += 1
        if self._answered_since_change >= self._limit and self._limit < self.settings.concurrency:
            self._limit += 1
            self._answered_since_change = 0
            self.stats.final_concurrency = self._limit
            self._remember()

    async def _post(self, body: JSONObject, timeout: float) -> Any:
        """The POST, bounded by ``timeout`` (``asyncio.TimeoutError``), or ``_GIVEN_UP`` as soon as the endpoint is
        given up on (``_tripped``): the calls in flight to a black hole do not each wait out their time-out.

        Within the server's advertised slots (``server_slots``) the server is working on every call in flight, so a
        call reaching its time-out does not cut it (its work would be lost and paid again): the time-out doubles
        (up to ``TIMEOUT_GROWTH`` times the configured one) for this call and every other, and it keeps waiting."""
        if self._tripped is None:
            self._tripped = asyncio.get_running_loop().create_future()
        post: asyncio.Future[Any] = asyncio.ensure_future(
            self._client.post("/chat/completions", body=body, cast_to=object)
        )
        waiting: set[asyncio.Future[Any]] = {post, self._tripped}
        t0 = time.perf_counter()
        try:
            while True:
                # within the slots the client's time-out (which only grows: never below this call's), else this call's
                limit = self._timeout if self._within_slots() else timeout
                left = max(0.0, limit - (time.perf_counter() - t0))
                done, _ = await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                if done or not self._extend(time.perf_counter() - t0):
                    break
        finally:
            if not post.done():
                post.cancel()
                post.add_done_callback(_quiet)
        if post in done:
            return post.result()
        if self._tripped in done:
            return _GIVEN_UP
        raise asyncio.TimeoutError

    def _within_slots(self) -> bool:
        slots = self.settings.server_slots
        return slots is not None and self._limit <= slots

    def _grow_timeout(self) -> bool:
        """Double the time-out, up to ``TIMEOUT_GROWTH`` times the configured one; whether it grew. It never
        shrinks within a client."""
        cap = self.settings.timeout_s * TIMEOUT_GROWTH
        if self._timeout >= cap:
            return False
        self._timeout = min(cap, self._timeout * 2)
        return True

    def _extend(self, waited: float) -> bool:
        """A call waited ``waited`` s: whether it may wait longer (within the server's slots, the time-out doubled
        while under its cap; once per doubling, however many calls reach it)."""
        if not self._within_slots():
            return False
        if waited < self._timeout:  # another call already doubled it
            return True
        if not self._grow_timeout():
            return False
        self.stats.timeout_extensions += 1
        self._remember()
        return True

    def _backoff(self, attempt: int) -> float:
        cap = min(self.settings.backoff_max_s, self.settings.backoff_base_s * (2**attempt))
        return random.uniform(cap / 2, cap)

    def _silent_for(self) -> float:
        """Seconds since the endpoint last answered (0 before it ever has)."""
        return time.perf_counter() - self._last_answer if self._ever_answered else 0.0

    def _stalled(self, sent: float) -> bool:
        """An attempt sent at ``sent`` that got no answer met the endpoint's stall, not its own slowness: the
        endpoint has answered in this client, no attempt sent after this one was answered before it (nothing
        overtook it: a prompt slow in itself is overtaken by the others), and the endpoint has not been silent for
        max_silence_s."""
        return (
            self._ever_answered and self._newest_answered <= sent and self._silent_for() < self.settings.max_silence_s
        )

    def _unreachable(self, error: str) -> None:
        """One more attempt refused or timed out; past ``max_consecutive_failures`` in a row, the endpoint is down
        (one that has answered in this client: once it has also been silent for ``max_silence_s``)."""
        self._unreachable_in_a_row += 1
        limit = self.settings.max_consecutive_failures
        if not limit or self._unreachable_in_a_row < limit or self._down is not None:
            return
        host = urlsplit(self.settings.endpoint()).netloc or self.settings.endpoint()
        if not self._ever_answered:
            self._down = f"endpoint {host} unreachable, stopped asking after {limit} failed attempts in a row: {error}"
        elif self._silent_for() >= self.settings.max_silence_s:
            self._down = (
                f"endpoint {host} unreachable, stopped asking: nothing answered for {self._silent_for():.0f} s "
                f"({self._unreachable_in_a_row} failed attempts in a row): {error}"
            )
        if self._down is not None:
            if self._tripped is not None and not self._tripped.done():
                self._tripped.set_result(None)
            self._gate_wakeup()

    # long by design: the retry loop: every HTTP outcome (answer, re-ask, retry, give up) classified in one place, so no
    # path escapes the bound
    async def complete(
        self, messages: list[dict[str, str]], schema: JSONObject | None, max_tokens: int | None = None
    ) -> CallResult:
        """One answer, or its error after the bounded retries; ``max_tokens`` over the settings' (more room for
        an answer that was cut off)."""
        s = self.settings
        import openai

        result = CallResult()
        last_error = "no attempt made"
        attempt = 0
        while attempt <= s.max_retries:
            if self._down is not None:
                result.error = self._down
                return result
            kwargs: dict[str, Any] = dict(s.extra_body)  # the pipeline's own fields below always win
            kwargs.update(model=s.model, messages=messages, temperature=s.temperature)
            kwargs["max_tokens"] = max_tokens or s.max_tokens
            if s.seed is not None:
                kwargs["seed"] = s.seed
            if s.top_logprobs:
                kwargs["logprobs"] = True
                kwargs["top_logprobs"] = s.top_logprobs
            use_schema = self._use_schema and schema is not None
            if use_schema:
                kwargs["response_format"] = {"type": "json_schema", "json_schema": schema}
            delay = None
            stall = False  # the endpoint's stall, not this call's failure: the attempt is not counted (_stalled)
            epoch = await self._enter()
            if self._down is not None:  # given up while this call waited its turn: no attempt
                await self._leave(epoch)
                result.error = self._down
                return result
            held = None  # this request's cost from above, reserved in the run's budget (judge.costs)
            if self._budget is not None:
                held = self._budget.reserve(s.model, messages, kwargs.get("response_format"), kwargs["max_tokens"])
                if held is None:
                    await self._leave(epoch)
                    result.error, result.not_asked = self._budget.why_not(), result.attempts == 0
                    return result
            used_timeout = self._timeout
            t0 = time.perf_counter()
            usage_seen: tuple[int, int] | None = None
            billed = False  # without usage: whether the request may still have been billed (it timed out)
            try:
                self.stats.calls += result.attempts == 0
                self.stats.http_attempts += 1
                result.attempts += 1
                # the client's documented low-level POST: the same transport, auth and typed errors as
                # `chat.completions.create`, but the messages are not re-walked through its TypedDict
                # transform and the answer is read as plain JSON instead of building pydantic models
                # (a third less CPU per call: bench/bench_judge_throughput.py)
                # the timeout bounds the whole call: the client's own bounds each read, so a server sending a
                # byte now and then would hold a call forever
                data = await self._post(kwargs, used_timeout)
                if data is _GIVEN_UP:  # the breaker tripped while this call was in flight: it is dropped at once
                    result.error = self._down
                    return result
                result.latency_ms = (time.perf_counter() - t0) * 1000
                self.stats.latency_ms.append(result.latency_ms)
                self._unreachable_in_a_row = 0
                self._answered(t0)
                if not isinstance(data, dict):  # a 200 that is not JSON (a proxy's page): retried
                    raise _NotJSON(redact(str(data), self._api_key)[:120])
                usage: JSONObject = data.get("usage") or {} if isinstance(data.get("usage"), dict) else {}
                result.prompt_tokens = _int(usage.get("prompt_tokens"))
                result.completion_tokens = _int(usage.get("completion_tokens"))
                usage_seen = (result.prompt_tokens, result.completion_tokens) if usage else None
                billed = usage_seen is None  # an answer without its usage: assume it cost what was held
                self.stats.prompt_tokens += result.prompt_tokens
                self.stats.completion_tokens += result.completion_tokens
                choices = data.get("choices")
                if not isinstance(choices, list) or not choices:
                    result.error = "answer has no choices"
                    return result
                msg = choices[0].get("message") if isinstance(choices[0], dict) else None
                if not isinstance(msg, dict):
                    result.error = "answer has no message"
                    return result
                # cut off where max_tokens ran out: kept (it is the judge's answer) but never read as a score
                result.truncated = choices[0].get("finish_reason") == "length"
                content = msg.get("content")
                if isinstance(content, str) and len(content) > MAX_ANSWER_CHARS:
                    # not a rubric's answer (a schema bounds its rationale): never a score, never cached whole
                    result.error = f"answer of {len(content):,} characters, more than {MAX_ANSWER_CHARS:,} (not stored)"
                    return result
                # everything the endpoint sends back is stored or shown somewhere: never with the key in it
                result.text = redact(content, self._api_key) if isinstance(content, str) else None
                result.logprobs = redact_tokens(_token_logprobs(choices[0].get("logprobs")), self._api_key)
                if result.text is None and msg.get("refusal"):
                    result.error = f"refusal: {redact(str(msg['refusal']), self._api_key)[:200]}"
                return result
            except openai.BadRequestError as exc:
                if use_schema and _schema_unsupported(exc):
                    self._use_schema = False  # endpoint without structured output: free text from now on
                    continue
                result.error = f"bad request (400): {redact(str(exc), self._api_key)[:300]}"
                return result
            except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
                result.error = f"{type(exc).__name__} ({exc.status_code}): {redact(str(exc), self._api_key)[:300]}"
                return result
            except openai.RateLimitError as exc:
                last_error = "rate limited (429)"
                ra = _retry_after_seconds(exc)
                delay = min(60.0, ra) if ra is not None else self._backoff(attempt)
            except (openai.APITimeoutError, asyncio.TimeoutError):
                billed = True  # the server may have answered, and billed, after we stopped waiting
                last_error = f"timeout after {self._timeout:g}s"
                delay = self._backoff(attempt)
                # a cut's own time-out counts toward the breaker, the others of its epoch do not; an endpoint that
                # has never answered counts every time-out after the first cut (a slow server's first wave may all
                # time out and it still gets a second, slower chance; a black hole is given up in the second wave)
                if self._timed_out(epoch) or (not self._ever_answered and epoch > 0):
                    self._unreachable(last_error)
                stall = self._stalled(t0)
            except openai.APIConnectionError as exc:
                last_error = f"connection error: {redact(str(exc), self._api_key)[:200]}"
                delay = self._backoff(attempt)
                self._unreachable(last_error)
                stall = self._stalled(t0)
            except openai.APIStatusError as exc:
                last_error = f"server error ({exc.status_code})"
                if exc.status_code < 500 and exc.status_code not in (408, 409):
                    result.error = f"{last_error}: {redact(str(exc), self._api_key)[:300]}"
                    return result
                delay = self._backoff(attempt)
            except openai.APIResponseValidationError as exc:
                last_error = f"malformed response: {redact(str(exc), self._api_key)[:200]}"
                delay = self._backoff(attempt)
            except (
                json.JSONDecodeError,
                UnicodeDecodeError,
                _NotJSON,
            ) as exc:  # a 200 whose body is not JSON (a proxy's HTML page)
                last_error = f"response body is not JSON: {redact(str(exc), self._api_key)[:120]}"
                delay = self._backoff(attempt)
            finally:
                if held is not None and self._budget is not None:
                    self._budget.settle(held, s.model, usage_seen, billed)
                await self._leave(epoch)
            if not stall:
                attempt += 1
            if attempt <= s.max_retries and delay is not None:
                await asyncio.sleep(delay)
        result.error = self._down or f"gave up after {result.attempts} attempts: {last_error}"
        return result
