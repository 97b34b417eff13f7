"""Calling the endpoint for a list of prompts: in this process, or spread over worker processes.

One event loop drives about 300 calls a second before the `openai` client's own CPU (2-3 ms a call)
becomes the limit, so at high concurrency against a fast endpoint the calls are spread over
``settings.processes`` worker processes (forked on Linux, one client and a share of the concurrency
each; elsewhere the calls stay in this process). Answers stream back over a pipe as they arrive and
are parsed and cached here, in the parent; an answer that cannot be parsed is asked once more.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import queue
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from eval_pipeline.judge.client import (
    CallResult,
    ClientStats,
    JudgeSettings,
    OpenAIJudgeClient,
)
from eval_pipeline.judge.parsing import JudgeParseError

MIN_CALLS_PER_PROCESS = 256  # a worker (fork, its own client, new connections) pays off over many waves of calls
CALLS_PER_PROCESS_CONCURRENCY = 24  # calls in flight per process: answers arrive in bursts, keep each loop light


@dataclass
class CallSpec:
    """One prompt: its cache key, messages, schema, and how to turn the answer text into a result."""

    key: str
    messages: list[dict[str, str]]
    schema: dict[str, Any] | None
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
    logprobs: list | None = None  # the used answer's token log probabilities, when the judge returned them

    def add(self, res: CallResult) -> None:
        self.attempts += res.attempts
        self.prompt_tokens += res.prompt_tokens
        self.completion_tokens += res.completion_tokens
        self.latency_ms = (self.latency_ms or 0.0) + res.latency_ms


OnAnswer = Callable[[str, CallOutcome], None]


def worker_processes(settings: JudgeSettings, calls: int) -> int:
    """How many processes to use: ``settings.processes`` if set (>0), else one per 24 calls in flight
    (at most two per core: the workers mostly wait, but their answers arrive in bursts), and only when
    each gets enough calls to repay its start-up."""
    if settings.processes > 0:
        n = settings.processes
    else:
        n = min(2 * (os.cpu_count() or 1), math.ceil(settings.concurrency / CALLS_PER_PROCESS_CONCURRENCY))
    return max(1, min(n, calls // MIN_CALLS_PER_PROCESS, settings.concurrency))


def _settle(spec: CallSpec, out: CallOutcome, res: CallResult) -> bool:
    """Fold one answer into the outcome; False when the answer could not be parsed (ask again)."""
    out.add(res)
    if res.error:
        out.error = res.error
        return True
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
            if _settle(spec, out, await client.complete(spec.messages, spec.schema)):
                break
        results[spec.key] = out
        if on_answer is not None:  # every final outcome: a score, a final unparseable answer, or an error
            on_answer(spec.key, out)

    try:
        await asyncio.gather(*(one(s) for s in specs))
    finally:
        await client.close()
    return results, client.stats


async def _worker_calls(settings: JudgeSettings, specs: list[CallSpec], out: Any) -> None:
    """In a worker: call the endpoint for each spec and write one JSON line per result as it completes."""
    client = OpenAIJudgeClient(settings)

    async def one(spec: CallSpec) -> None:
        res = await client.complete(spec.messages, spec.schema)
        out.write(json.dumps({"key": spec.key, **asdict(res)}) + "\n")
        out.flush()

    try:
        await asyncio.gather(*(one(s) for s in specs))
    finally:
        await client.close()
    out.write(json.dumps({"stats": asdict(client.stats)}) + "\n")


def _fork_worker(settings: JudgeSettings, shard: list[CallSpec]) -> tuple[int, Any]:
    """Fork a worker for one shard; it answers on a pipe. Forked (not spawned) so it starts in
    milliseconds with the prompts and the imported client already in memory; it touches nothing but its
    own event loop and the pipe, and leaves with os._exit so no parent clean-up runs twice."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker
        os.close(r)
        code = 0
        try:
            with os.fdopen(w, "w", encoding="utf-8") as out:
                asyncio.run(_worker_calls(settings, shard, out))
        except BaseException:  # noqa: BLE001 - reported through the exit code and stderr
            code = 1
            try:
                sys.stderr.write(traceback.format_exc())
                sys.stderr.flush()
            except Exception:  # noqa: BLE001
                pass
        finally:
            os._exit(code)
    os.close(w)
    return pid, os.fdopen(r, encoding="utf-8")


# long by design: fork, feed, collect and reap the worker processes; the clean-up in its finally must see every step
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
    events: queue.Queue = queue.Queue()
    # forked before this call starts any thread of its own (the cache writer starts with the first answer)
    workers = [_fork_worker(replace(settings, concurrency=shares[i], processes=1), shards[i]) for i in range(n)]

    def pump(i: int, pipe: Any) -> None:
        for line in pipe:
            events.put((i, line))
        events.put((i, None))

    for i, (_, pipe) in enumerate(workers):
        threading.Thread(target=pump, args=(i, pipe), daemon=True, name=f"judge-worker-{i}-reader").start()
    results: dict[str, CallOutcome] = {}
    again: list[CallSpec] = []
    stats = ClientStats(processes=n)
    finished: set[int] = set()
    drained = False  # every pipe read to its end: each worker has exited or is exiting by itself
    try:
        open_pipes = n
        while open_pipes:
            i, line = events.get()
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
            if not _settle(spec, out, CallResult(**msg)):
                again.append(spec)
            elif on_answer is not None:
                on_answer(spec.key, out)
        drained = True
    finally:
        codes = []
        for pid, pipe in workers:
            if not drained:
                try:
                    os.kill(pid, signal.SIGKILL)  # the parent is leaving early: no worker outlives it
                    # (after the pipes are drained a worker that died is left to exit with its own code)
                except ProcessLookupError:
                    pass
            codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
            pipe.close()
    bad = [(i, c) for i, c in enumerate(codes) if c != 0 or i not in finished]
    if bad:
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
    """Outcome per spec key, and the client statistics. ``on_answer`` sees every final outcome as it arrives."""
    n = worker_processes(settings, len(specs)) if hasattr(os, "fork") and sys.platform.startswith("linux") else 1
    if n <= 1:
        return asyncio.run(_call_all(settings, specs, on_answer))
    return _in_workers(settings, specs, n, on_answer)
