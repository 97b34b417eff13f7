"""Calling the endpoint for a list of prompts: in this process, or spread over worker processes.

One event loop drives about 300 calls a second before the `openai` client's own CPU (2-3 ms a call)
becomes the limit, so at high concurrency against a fast endpoint the calls are spread over
``settings.processes`` worker processes (eval_pipeline.judge.worker: each a fresh interpreter started
once with ``subprocess`` and reused, never a fork of this threaded process; one client and a share of the
concurrency each). Answers stream back over a pipe as they arrive and are parsed and cached here, in the
parent; an answer that cannot be parsed is asked once more.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import json
import math
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from eval_pipeline.core import interrupts
from eval_pipeline.core import settings as env_settings
from eval_pipeline.core.types import JSONObject
from eval_pipeline.judge import costs
from eval_pipeline.judge.client import CallResult, ClientStats, OpenAIJudgeClient, advertised_slots
from eval_pipeline.judge.config import JudgeSettings
from eval_pipeline.judge.parsing import JudgeParseError

MIN_CALLS_PER_PROCESS = 256  # a worker (its own client, new connections) pays off over many waves of calls
CALLS_PER_PROCESS_CONCURRENCY = 24  # calls in flight per process: answers arrive in bursts, keep each loop light


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

    def add(self, res: CallResult) -> None:
        self.not_asked = res.not_asked and not self.attempts
        self.attempts += res.attempts
        self.prompt_tokens += res.prompt_tokens
        self.completion_tokens += res.completion_tokens
        self.latency_ms = (self.latency_ms or 0.0) + res.latency_ms


OnAnswer = Callable[[str, CallOutcome], None]


STOP_POLL_S = 0.1  # how often a batch of calls looks for Ctrl-C or SIGTERM (core.interrupts)


def worker_processes(settings: JudgeSettings, calls: int) -> int:
    """How many processes to use: ``settings.processes`` if set (>0), else one per 24 calls in flight
    (at most two per core: the workers mostly wait, but their answers arrive in bursts), and only when
    each gets enough calls to repay its start-up."""
    if settings.processes > 0:
        n = settings.processes
    else:
        n = min(2 * (os.cpu_count() or 1), math.ceil(settings.concurrency / CALLS_PER_PROCESS_CONCURRENCY))
    return max(1, min(n, calls // MIN_CALLS_PER_PROCESS, settings.concurrency))


MAX_ROOM_TOKENS = 4096  # a cut-off answer is asked again with twice the room, up to this many tokens


def more_room(cut_at: int) -> int | None:
    """The ``max_tokens`` to ask a cut-off answer again with, or None: at temperature 0 the same room gives the same
    cut, so it is asked again only with more room, and not at all past ``MAX_ROOM_TOKENS``."""
    room = min(2 * cut_at, MAX_ROOM_TOKENS)
    return room if room > cut_at else None


def _settle(spec: CallSpec, out: CallOutcome, res: CallResult, room: int) -> bool:
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


async def _call_all(
    settings: JudgeSettings,
    specs: list[CallSpec],
    on_answer: OnAnswer | None,
    outcomes: dict[str, CallOutcome] | None = None,
) -> tuple[dict[str, CallOutcome], ClientStats]:
    """Call the endpoint for each spec in this event loop; an answer that cannot be used is asked once more."""
    client = OpenAIJudgeClient(settings)
    results: dict[str, CallOutcome] = {}
    outcomes = outcomes or {}

    async def one(spec: CallSpec) -> None:
        out = outcomes.get(spec.key) or CallOutcome()
        tries = 1 if spec.key in outcomes else 2  # an answer already refused once by the parser gets one more
        for _ in range(tries):
            room = settings.max_tokens
            if out.cut_at:  # cut off: asked again only with more room, or not at all
                room = more_room(out.cut_at) or 0
                if not room:
                    out.error = (out.error or "") + f"; not asked again (already {out.cut_at} tokens)"
                    break
            if _settle(spec, out, await client.complete(spec.messages, spec.schema, max_tokens=room), room):
                break
        results[spec.key] = out
        if on_answer is not None:  # every final outcome: a score, a final unparseable answer, or an error
            on_answer(spec.key, out)

    async def until_stopped() -> None:  # Ctrl-C or SIGTERM: the calls in flight are cancelled, no new one starts
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
    return results, client.stats


class _Worker:
    """One worker process (eval_pipeline.judge.worker), fed batches on its stdin, answering on its stdout."""

    def __init__(self) -> None:
        self.env = _environment()  # what it inherited: the endpoint and key come from there, as in this process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eval_pipeline.judge.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, settings: JudgeSettings, shard: list[CallSpec]) -> None:
        assert self.proc.stdin is not None
        batch = {
            "settings": settings.to_json(),
            "specs": [{"key": s.key, "messages": s.messages, "schema": s.schema} for s in shard],
        }
        self.proc.stdin.write(json.dumps(batch) + "\n")
        self.proc.stdin.flush()

    def stop(self, kill: bool = False) -> int:
        """End the worker (its stdin closed; SIGKILL when ``kill`` or when it does not leave) and its exit code."""
        if kill and self.alive():
            self.proc.kill()
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass  # a worker that died has a broken pipe
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code


_POOL: list[_Worker] = []  # started once, reused by every batch of calls this process makes
_POOL_LOCK = threading.Lock()


def _environment() -> str:
    """A fingerprint of this process's environment (the client reads the endpoint and key from it)."""
    return hashlib.sha256(repr(sorted(os.environ.items())).encode()).hexdigest()


def _workers(n: int) -> list[_Worker]:
    """``n`` live workers from the pool, starting what is missing; dead ones, and ones started under another
    environment (another endpoint or key), are replaced."""
    with _POOL_LOCK:
        env = _environment()
        stale = [w for w in _POOL if not w.alive() or w.env != env]
        for w in stale:
            w.stop(kill=True)
        _POOL[:] = [w for w in _POOL if w not in stale]
        while len(_POOL) < n:
            _POOL.append(_Worker())
        return _POOL[:n]


def _discard(workers: list[_Worker]) -> list[int]:
    """Take workers out of the pool and end them (their state is unknown); their exit codes."""
    with _POOL_LOCK:
        _POOL[:] = [w for w in _POOL if w not in workers]
    return [w.stop(kill=True) for w in workers]


@atexit.register
def shutdown_workers() -> None:
    """End the pool: each worker leaves when its stdin closes."""
    with _POOL_LOCK:
        pool, _POOL[:] = list(_POOL), []
    for w in pool:
        w.stop()


# long by design: feed, collect and (on failure) end the worker processes; the clean-up must see every step
def _in_workers(
    settings: JudgeSettings, specs: list[CallSpec], n: int, on_answer: OnAnswer | None
) -> tuple[dict[str, CallOutcome], ClientStats]:
    # the concurrency limit is split exactly (it may be a provider's rate limit), the prompts in proportion
    shares = [settings.concurrency // n + (1 if i < settings.concurrency % n else 0) for i in range(n)]
    pattern = [i for i, share in enumerate(shares) for _ in range(share)]
    shards: list[list[CallSpec]] = [[] for _ in range(n)]
    for j, spec in enumerate(specs):
        shards[pattern[j % len(pattern)]].append(spec)
    by_key = {s.key: s for s in specs}
    events: queue.Queue[Any] = queue.Queue()
    workers = _workers(n)

    def pump(i: int, pipe: Any) -> None:  # stops at the end of its batch, leaving the pipe to the next one
        try:
            for line in pipe:
                events.put((i, line))
                if line.startswith('{"stats"'):
                    break
        except (OSError, ValueError):  # the pipe closed under us: the worker is being ended
            pass
        finally:
            events.put((i, None))

    results: dict[str, CallOutcome] = {}
    again: list[CallSpec] = []
    stats = ClientStats(processes=n)
    finished: set[int] = set()
    ok = False
    try:
        for i, w in enumerate(workers):
            w.send(replace(settings, concurrency=shares[i], processes=1), shards[i])
            threading.Thread(target=pump, args=(i, w.proc.stdout), daemon=True, name=f"judge-worker-{i}-reader").start()
        open_pipes = n
        while open_pipes:
            try:
                i, line = events.get(timeout=STOP_POLL_S)
            except queue.Empty:
                if interrupts.requested():
                    raise KeyboardInterrupt from None  # the workers are ended below
                continue
            if line is None:
                open_pipes -= 1
                continue
            msg = json.loads(line)
            if "stats" in msg:
                stats.add(ClientStats(**msg["stats"]))
                finished.add(i)
                continue
            spec = by_key[msg.pop("key")]
            out = CallOutcome()
            results[spec.key] = out
            if not _settle(spec, out, CallResult(**msg), settings.max_tokens):
                again.append(spec)
            elif on_answer is not None:
                on_answer(spec.key, out)
        ok = len(finished) == n
    except BrokenPipeError:
        pass  # a worker died before its batch was sent: reported below
    finally:
        if not ok:  # leaving early or a worker died: no worker outlives this batch in an unknown state
            codes = dict(enumerate(_discard(workers)))
    if not ok:
        bad = [(i, codes[i]) for i in range(n) if i not in finished]
        raise RuntimeError(
            "judge worker(s) died before finishing: "
            + ", ".join(f"worker {i} exit code {c}" for i, c in bad)
            + " (their traceback is on stderr)"
        )
    if again:  # the one re-ask for unparseable answers, in this process
        retried, st = asyncio.run(
            _call_all(settings, again, on_answer, outcomes={s.key: results[s.key] for s in again})
        )
        results.update(retried)
        stats.add(st)
    return results, stats


def call_specs(
    settings: JudgeSettings, specs: list[CallSpec], on_answer: OnAnswer | None = None
) -> tuple[dict[str, CallOutcome], ClientStats]:
    """Outcome per spec key, and the client statistics. ``on_answer`` sees every final outcome as it arrives.
    Never more calls in flight, over all worker processes, than the slots the server advertises."""
    slots = advertised_slots(settings.endpoint(), env_settings.openai_api_key()) if specs else None
    if slots is not None:
        settings = replace(settings, concurrency=min(slots, settings.concurrency), server_slots=slots)
    n = worker_processes(settings, len(specs))
    if costs.current() is not None:  # a budget is drawn on request by request, by this process's one client
        n = 1
    if n <= 1:
        return asyncio.run(_call_all(settings, specs, on_answer))
    return _in_workers(settings, specs, n, on_answer)
