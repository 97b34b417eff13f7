"""The LLM judge client: the `openai` package against any OpenAI-compatible endpoint, one batch of prompts at a time.

``answer_all`` is the one way in: it takes one judge's ``JudgeConfig`` (``for_judge``: endpoint, model, sampling,
call policy) and the batch's prompts, asks each (or folds in what worker processes already asked, judge.workers),
asks again what could not be used (an unparseable answer once; an answer cut off at max_tokens only with more
room), and gives back each prompt's outcome and the batch's statistics. Below it, ``OpenAIJudgeClient`` makes each
request: temperature 0 and a fixed seed by default; calls in flight limited and adapted to what the endpoint
serves; bounded retries with exponential backoff and full jitter that honour Retry-After on 429; per-call
time-outs; a circuit breaker for an endpoint that is down; each request reserved from the run's budget before it is
sent (judge.costs) and sent by judge.transport. Structured output is asked for with a JSON schema; an endpoint that
rejects `response_format` is asked again without it (the prompt itself spells out the JSON form). The key is read
from OPENAI_API_KEY when a client is made and never appears in a reason or log (judge.redact).
"""

from __future__ import annotations

import asyncio
import functools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from eval_pipeline.core import interrupts
from eval_pipeline.core import settings as env_settings
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import JSONObject
from eval_pipeline.judge import costs, reply, transport
from eval_pipeline.judge.bounded_http import bounded_client
from eval_pipeline.judge.parsing import JudgeParseError

if TYPE_CHECKING:  # imported where a client is made: the openai package costs ~0.4 s to import, paid by every
    pass  # run's process that loads the definitions, most of which never call an endpoint


@dataclass
class CallSpec:
    """One prompt: its cache key, messages, schema, and how to turn the answer text into a result."""

    key: str
    messages: list[dict[str, str]]
    schema: JSONObject | None
    parse: Callable[[str | None], Any]


@dataclass
class CallOutcome:
    parsed: Any = None
    error: str | None = None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float | None = None
    attempts: int = 0
    answer_text: str | None = None
    logprobs: list[Any] | None = None  # the used answer's token log probabilities, when the judge returned them
    cut_at: int = 0  # > 0: the last answer was cut off at this many tokens (finish_reason length)
    not_asked: bool = False  # never sent: the run's budget would not cover it
    pending: bool = False  # waiting on a judge batch (judge.batch): no answer yet, nothing to cache

    def add(self, res: CallResult) -> None:
        self.not_asked = res.not_asked and not self.attempts
        self.attempts += res.attempts
        self.prompt_tokens += res.prompt_tokens
        self.completion_tokens += res.completion_tokens
        self.latency_ms = (self.latency_ms or 0.0) + res.latency_ms


OnAnswer = Callable[[str, CallOutcome], None]


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
    latencies_ms: list[float] = field(default_factory=list)  # one per call
    max_in_flight: int = 0
    processes: int = 1
    timeout_cuts: int = 0  # how often a time-out halved the calls in flight (an endpoint slower than asked of it)
    timeout_extensions: int = 0  # how often calls in flight past their time-out were given twice as long instead
    start_concurrency: int = 0  # calls allowed in flight at the start (what an earlier client learnt, else config)
    start_timeout_s: float = 0.0
    final_concurrency: int = 0  # calls allowed in flight when the batch ended (0: never cut)
    batch_prompt_tokens: int = 0  # of the tokens, those answered through a Batch API (judge.batch), at its price
    batch_completion_tokens: int = 0

    def add(self, other: ClientStats) -> None:
        """Fold in another client's counts (a worker's, or the re-ask pass); peaks add up to an upper bound."""
        self.calls += other.calls
        self.batch_prompt_tokens += other.batch_prompt_tokens
        self.batch_completion_tokens += other.batch_completion_tokens
        self.http_attempts += other.http_attempts
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.max_in_flight += other.max_in_flight
        self.latencies_ms += other.latencies_ms
        self.timeout_cuts += other.timeout_cuts
        self.timeout_extensions += other.timeout_extensions
        self.final_concurrency = max(self.final_concurrency, other.final_concurrency)
        self.start_concurrency = max(self.start_concurrency, other.start_concurrency)
        self.start_timeout_s = max(self.start_timeout_s, other.start_timeout_s)


def request_body(
    settings: JudgeConfig, messages: list[dict[str, str]], schema: JSONObject | None, max_tokens: int | None = None
) -> JSONObject:
    """The chat-completion request asking ``settings``' judge ``messages`` (under ``schema``, None: free text), with
    ``max_tokens`` over the settings' (more room): the body the online client POSTs and a Batch input line carries
    (judge.batch), the same bytes either way. The pipeline's own fields win over the panel's ``extra_body``."""
    body: JSONObject = dict(settings.extra_body)
    body.update(model=settings.model, messages=messages, temperature=settings.temperature)
    body["max_tokens"] = max_tokens or settings.max_tokens
    if settings.seed is not None:
        body["seed"] = settings.seed
    if settings.top_logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = settings.top_logprobs
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": schema}
    return body


TIMEOUT_GROWTH = 4  # a call's time-out grows (doubling on time-outs) to at most this many times EVAL_JUDGE_TIMEOUT


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


def forget_learnt() -> None:
    """Start from the configured values again (a test, or a server restarted with more slots)."""
    with _LEARNT_LOCK:
        _LEARNT.clear()


class OpenAIJudgeClient:
    """One judge (model + endpoint). Create inside the event loop that uses it. It starts from what earlier clients
    of this process learnt about the same endpoint and model (``learnt``), never past the configured concurrency
    (which ``judge.calls.call_specs`` caps at the slots the server advertises)."""

    def __init__(self, settings: JudgeConfig, api_key: str | None = None):
        self.settings = settings
        self._api_key = api_key if api_key is not None else env_settings.openai_api_key()
        base_url = settings.base_url
        import openai

        self._client = openai.AsyncOpenAI(
            api_key=self._api_key or "not-needed",
            base_url=base_url,
            timeout=settings.timeout_s * TIMEOUT_GROWTH,  # each call is bounded by ours (wait_for), which grows
            max_retries=0,  # retries are ours: bounded, jittered, Retry-After aware
            http_client=bounded_client(),  # every answer bounded in size, decoded size included
        )
        # adaptive: calls in flight at most ``_limit`` (halved when a call times out, one more per ``_limit``
        # answers, never past the configured concurrency); the time-out doubles when calls time out, up to
        # TIMEOUT_GROWTH times the configured one. A slow server (few slots, long answers) then converges on what
        # it can serve instead of every call being cut and asked again from the start.
        self._limit = max(1, settings.concurrency)
        self._timeout = settings.timeout_s
        self._key = (settings.endpoint, settings.model)
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

    def _allowed(self, timeout: float, waited: float) -> float:
        """How long in all a call sent with ``timeout`` may wait, having waited ``waited`` s (judge.transport asks
        each time the time runs out). Outside the server's advertised slots: its own time-out. Within them
        (``server_slots``) the server is working on every call in flight, so a call cut at its time-out would be
        lost and paid again: the client's time-out, doubled when a call reaches it (up to ``TIMEOUT_GROWTH`` times
        the configured one; once per doubling, however many calls reach it), for this call and every other."""
        if not self._within_slots():
            return timeout
        if waited >= self._timeout and self._first_wave_waited():
            return self._timeout  # an endpoint that never answered: one doubling, the patience of two waves
        if waited >= self._timeout and self._grow_timeout():
            self.stats.timeout_extensions += 1
            self._remember()
        return self._timeout

    def _first_wave_waited(self) -> bool:
        """The endpoint has never answered in this client and its calls within the slots have already waited twice
        the configured time-out: as long as one that advertises no slots is given over its first two waves (cut at
        the time-out, then twice it), so a black hole that answers /props is given up no later than one that does
        not (#73: 20.6 s against 10.2 s)."""
        return not self._ever_answered and self._timeout >= 2 * self.settings.timeout_s

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

    def _unreachable(self, error: str, second_wave: bool = False) -> None:
        """One more attempt refused or timed out; past ``max_consecutive_failures`` in a row, the endpoint is down
        (one that has answered in this client: once it has also been silent for ``max_silence_s``, and then at its
        first failure past that silence, however few came before). ``second_wave``:
        a time-out of the second wave of an endpoint that never answered, at the longest time-out it is given: down
        whatever the count (a server that advertises few slots sends small waves, and counting to the limit took
        many waves of the grown time-out)."""
        self._unreachable_in_a_row += 1
        limit = self.settings.max_consecutive_failures
        if not limit or self._down is not None:
            return
        silent = self._ever_answered and self._silent_for() >= self.settings.max_silence_s
        if self._unreachable_in_a_row < limit and not (second_wave and not self._ever_answered) and not silent:
            return  # an endpoint silent past max_silence_s is down at its next failure, however few in a row
        host = urlsplit(self.settings.endpoint).netloc or self.settings.endpoint
        if not self._ever_answered:
            self._down = (
                f"endpoint {host} unreachable, stopped asking after {self._unreachable_in_a_row} failed attempts in "
                f"a row: {error}"
            )
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
        result = CallResult()
        last_error = "no attempt made"
        attempt = 0
        while attempt <= s.max_retries:
            if self._down is not None:
                result.error = self._down
                return result
            use_schema = self._use_schema and schema is not None
            kwargs = request_body(s, messages, schema if use_schema else None, max_tokens)
            delay = None
            stall = False  # the endpoint's stall, not this call's failure: the attempt is not counted (_stalled)
            epoch = await self._enter()
            try:
                if self._down is not None:  # given up while this call waited its turn: no attempt
                    result.error = self._down
                    return result
                if self._tripped is None:  # set when the endpoint is given up: every call in flight stops waiting
                    self._tripped = asyncio.get_running_loop().create_future()
                allowed = functools.partial(self._allowed, self._timeout)
                t0 = time.perf_counter()
                sent = await transport.send(self._client, kwargs, allowed, self._tripped, self._budget, self._api_key)
                if sent.failure == reply.NOT_SENT:  # the run's budget would not cover it
                    result.error, result.not_asked = sent.message, result.attempts == 0
                    return result
                self.stats.calls += result.attempts == 0
                self.stats.http_attempts += 1
                result.attempts += 1
                if sent.failure == reply.GIVEN_UP:  # the breaker tripped while this call was in flight: dropped
                    result.error = self._down
                    return result
                if sent.answered:
                    result.latency_ms = (time.perf_counter() - t0) * 1000
                    self.stats.latencies_ms.append(result.latency_ms)
                    self._unreachable_in_a_row = 0
                    self._answered(t0)
                if sent.failure is None:
                    result.prompt_tokens, result.completion_tokens = sent.prompt_tokens, sent.completion_tokens
                    self.stats.prompt_tokens += sent.prompt_tokens
                    self.stats.completion_tokens += sent.completion_tokens
                    result.text, result.error, result.truncated = sent.text, sent.error, sent.truncated
                    result.logprobs = sent.logprobs
                    return result
                if sent.failure == reply.BAD_REQUEST:
                    if use_schema and sent.schema_unsupported:
                        self._use_schema = False  # endpoint without structured output: free text from now on
                        continue
                    result.error = f"bad request (400): {sent.message}"
                    return result
                if sent.failure == reply.REFUSED:
                    result.error = sent.message
                    return result
                if sent.failure == reply.RATE_LIMITED:
                    last_error = "rate limited (429)"
                    ra = sent.retry_after
                    delay = min(60.0, ra) if ra is not None else self._backoff(attempt)
                elif sent.failure == reply.TIMEOUT:
                    last_error = f"timeout after {self._timeout:g}s"
                    patient = self._timeout >= self.settings.timeout_s * TIMEOUT_GROWTH  # the longest time-out given
                    # within the slots, a first wave that waited its doubled time-out had two waves' patience
                    waited_two = self._within_slots() and self._first_wave_waited()
                    delay = self._backoff(attempt)
                    # a cut's own time-out counts toward the breaker, the others of its epoch do not; an endpoint
                    # that has never answered counts every time-out after the first cut (a slow server's first wave
                    # may all time out and it still gets a second, slower chance; a black hole is given up in the
                    # second wave)
                    if self._timed_out(epoch) or (not self._ever_answered and epoch > 0):
                        self._unreachable(
                            last_error, second_wave=(not self._ever_answered and epoch > 0 and patient) or waited_two
                        )
                    stall = self._stalled(t0)
                elif sent.failure == reply.CONNECTION:
                    last_error = f"connection error: {sent.message}"
                    delay = self._backoff(attempt)
                    self._unreachable(last_error)
                    stall = self._stalled(t0)
                elif sent.failure == reply.STATUS:
                    last_error = f"server error ({sent.status})"
                    if sent.status is not None and sent.status < 500 and sent.status not in (408, 409):
                        result.error = f"{last_error}: {sent.message}"
                        return result
                    delay = self._backoff(attempt)
                elif sent.failure == reply.MALFORMED:
                    last_error = f"malformed response: {sent.message}"
                    delay = self._backoff(attempt)
                else:  # reply.NOT_JSON: a body that is not a JSON object (a proxy's HTML page)
                    last_error = f"response body is not JSON: {sent.message}"
                    delay = self._backoff(attempt)
            finally:
                await self._leave(epoch)
            if not stall:
                attempt += 1
            if attempt <= s.max_retries and delay is not None:
                await asyncio.sleep(delay)
        result.error = self._down or f"gave up after {result.attempts} attempts: {last_error}"
        return result


MAX_ROOM_TOKENS = 4096  # a cut-off answer is asked again with twice the room, up to this many tokens


def more_room(cut_at: int) -> int | None:
    """The ``max_tokens`` to ask a cut-off answer again with, or None: at temperature 0 the same room gives the same
    cut, so it is asked again only with more room, and not at all past ``MAX_ROOM_TOKENS``."""
    room = min(2 * cut_at, MAX_ROOM_TOKENS)
    return room if room > cut_at else None


def settle(spec: CallSpec, out: CallOutcome, res: CallResult, room: int) -> bool:
    """Fold one answer, asked with ``room`` tokens, into the outcome; False when it could not be used (ask again)."""
    out.add(res)
    if res.error:
        out.error = res.error
        return True
    if res.truncated and 0 < res.completion_tokens < room:  # cut before max_tokens: the server ran out of context
        out.error = (
            f"answer cut off after {res.completion_tokens} tokens, before max_tokens {room}: the server's context "
            f"is full (a prompt of {res.prompt_tokens} tokens); not asked again (more room cannot help; give the "
            "server a larger context per slot)"
        )
        out.cut_at = 0
        out.answer_text = res.text
        return True
    if res.truncated:  # whatever its text would parse to, a cut-off answer is not the judge's whole answer
        again = "" if not out.cut_at else f" (asked again with {room} after a cut at {out.cut_at})"
        out.error = f"answer cut off at max_tokens {room} (finish_reason length){again}: not used as a score"
        out.cut_at = room
        out.answer_text = res.text
        return False
    out.cut_at = 0
    try:
        out.parsed = spec.parse(res.text)
    except JudgeParseError as exc:
        out.error = f"unparseable answer: {exc} (after one retry)"
        out.answer_text = res.text  # kept: if the re-ask is unparseable too, this is the judge's answer
        return False
    out.error = None
    out.answer_text = res.text
    out.logprobs = res.logprobs
    return True


STOP_POLL_S = 0.1  # how often a batch of calls looks for Ctrl-C or SIGTERM (core.interrupts)


def answer_all(
    settings: JudgeConfig,
    specs: list[CallSpec],
    on_answer: OnAnswer | None = None,
    first: Iterable[tuple[str, CallResult] | ClientStats] | None = None,
) -> tuple[dict[str, CallOutcome], ClientStats]:
    """Each spec's outcome, and the batch's statistics: the one way into the client.

    ``first``, when given, is what worker processes already asked (judge.workers: each answer as it arrives, keyed
    by its spec, and each worker's statistics): every answer is folded in here, and what could not be used is asked
    again in this process. Otherwise every spec is asked here. An unparseable answer is asked once more; one cut off
    at max_tokens only with more room. ``on_answer`` sees every final outcome as it arrives (a score, a final
    unusable answer, or an error)."""
    outcomes: dict[str, CallOutcome] = {}
    stats = ClientStats()
    todo = specs
    if first is not None:
        by_key = {s.key: s for s in specs}
        todo, workers = [], 0
        for item in first:
            if isinstance(item, ClientStats):
                stats.add(item)
                workers += 1
                continue
            key, res = item
            out = outcomes[key] = CallOutcome()
            if not settle(by_key[key], out, res, settings.max_tokens):
                todo.append(by_key[key])
            elif on_answer is not None:
                on_answer(key, out)
        stats.processes = max(1, workers)
    if todo:
        stats.add(asyncio.run(_ask_all(settings, todo, on_answer, outcomes)))
    return outcomes, stats


async def _ask_all(
    settings: JudgeConfig, specs: list[CallSpec], on_answer: OnAnswer | None, outcomes: dict[str, CallOutcome]
) -> ClientStats:
    """Ask the endpoint for each spec in this event loop, into ``outcomes``; an answer that cannot be used is asked
    once more (a spec with an outcome already, folded in from a worker, has had its first ask). Ctrl-C or SIGTERM
    cancels the calls in flight and starts no new one (KeyboardInterrupt)."""
    client = OpenAIJudgeClient(settings)

    async def one(spec: CallSpec) -> None:
        out = outcomes.get(spec.key) or CallOutcome()
        tries = 1 if spec.key in outcomes else 2
        for _ in range(tries):
            room = settings.max_tokens
            if out.cut_at:  # cut off: asked again only with more room, or not at all
                room = more_room(out.cut_at) or 0
                if not room:
                    out.error = (out.error or "") + f"; not asked again (already {out.cut_at} tokens)"
                    break
            if settle(spec, out, await client.complete(spec.messages, spec.schema, max_tokens=room), room):
                break
        outcomes[spec.key] = out
        if on_answer is not None:
            on_answer(spec.key, out)

    async def until_stopped() -> None:
        while not interrupts.requested():
            await asyncio.sleep(STOP_POLL_S)

    loop = asyncio.get_running_loop()
    default = loop.get_exception_handler()

    def quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:  # asyncio's own type
        exc = context.get("exception")
        if interrupts.requested() or isinstance(exc, asyncio.CancelledError) or interrupts.is_interrupt(exc):
            return  # a signal landed inside the loop (a socket write, a callback): only the interruption is told
        if default is not None:
            default(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(quiet)
    calls: asyncio.Future[Any] = asyncio.gather(*(one(s) for s in specs))
    watch: asyncio.Future[Any] = asyncio.ensure_future(until_stopped())
    try:
        await asyncio.wait([calls, watch], return_when=asyncio.FIRST_COMPLETED)
        if not calls.done():
            calls.cancel()
            await asyncio.gather(calls, return_exceptions=True)
            raise KeyboardInterrupt
        calls.result()
    finally:
        watch.cancel()
        await client.close()
    return client.stats
