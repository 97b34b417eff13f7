"""Worker processes for the calls: the pool (in the step's process) and the worker's own side
(``python -m eval_pipeline.judge.workers``), with the protocol between them in one place.

A worker is started with ``subprocess`` (a fresh interpreter, never ``os.fork`` of a process where Dagster's threads
run: a fork can inherit a lock another thread holds and hang), once, and reused for every batch of calls the
process makes. Protocol, one JSON document per line:

- stdin, per batch: ``{"settings": <the JudgeConfig fields>, "specs": [{"key", "messages", "schema"}, ...]}``;
- stdout, per answer as it arrives: ``{"key": ..., <CallResult fields>}``, then ``{"stats": {...}}`` when the
  batch is done.

A worker leaves when its stdin closes (the parent is gone or done). The API key is read from the environment it
inherits, as in the parent; it is never on the command line or in the protocol.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import asdict, replace
from typing import TextIO

from eval_pipeline.core import interrupts
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import JSONObject
from eval_pipeline.judge.client import STOP_POLL_S, CallResult, CallSpec, ClientStats, OpenAIJudgeClient


class _Worker:
    """One worker process (``python -m eval_pipeline.judge.workers``), fed batches on its stdin, answering on its
    stdout."""

    def __init__(self) -> None:
        self.env = _environment()  # what it inherited: the endpoint and key come from there, as in this process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eval_pipeline.judge.workers"],
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

    def send(self, settings: JudgeConfig, shard: list[CallSpec]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(batch_line(settings, shard))
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


def fan_out(settings: JudgeConfig, specs: list[CallSpec], n: int) -> Iterator[tuple[str, CallResult] | ClientStats]:
    """Ask ``specs`` in ``n`` worker processes: each answer as it arrives, keyed by its spec (not yet parsed: the
    client folds it in, judge.client.answer_all), then each worker's statistics. The concurrency is split exactly
    over the workers (it may be a provider's rate limit), the prompts in proportion. Ctrl-C or SIGTERM, or a worker
    that dies, ends every worker of the batch (KeyboardInterrupt; a RuntimeError naming the worker)."""
    shares = [settings.concurrency // n + (1 if i < settings.concurrency % n else 0) for i in range(n)]
    pattern = [i for i, share in enumerate(shares) for _ in range(share)]
    shards: list[list[CallSpec]] = [[] for _ in range(n)]
    for j, spec in enumerate(specs):
        shards[pattern[j % len(pattern)]].append(spec)
    events: queue.Queue[tuple[int, str | None]] = queue.Queue()
    pool = _workers(n)

    def pump(i: int, pipe: TextIO) -> None:  # stops at the end of its batch, leaving the pipe to the next one
        try:
            for line in pipe:
                events.put((i, line))
                if line.startswith('{"stats"'):
                    break
        except (OSError, ValueError):  # the pipe closed under us: the worker is being ended
            pass
        finally:
            events.put((i, None))

    finished: set[int] = set()
    ok = False
    try:
        for i, w in enumerate(pool):
            w.send(replace(settings, concurrency=shares[i], processes=1), shards[i])
            assert w.proc.stdout is not None
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
                finished.add(i)
                yield ClientStats(**msg["stats"])
                continue
            yield msg.pop("key"), CallResult(**msg)
        ok = len(finished) == n
    except BrokenPipeError:
        pass  # a worker died before its batch was sent: reported below
    finally:
        if not ok:  # leaving early or a worker died: no worker outlives this batch in an unknown state
            codes = dict(enumerate(_discard(pool)))
    if not ok:
        bad = [(i, codes[i]) for i in range(n) if i not in finished]
        raise RuntimeError(
            "judge worker(s) died before finishing: "
            + ", ".join(f"worker {i} exit code {c}" for i, c in bad)
            + " (their traceback is on stderr)"
        )


async def _answer(settings: JudgeConfig, specs: list[JSONObject], out: TextIO) -> None:
    """In a worker: ask each spec and write one JSON line per result as it completes, then the stats."""
    client = OpenAIJudgeClient(settings)

    async def one(spec: JSONObject) -> None:
        res = await client.complete(spec["messages"], spec["schema"])
        out.write(json.dumps({"key": spec["key"], **asdict(res)}) + "\n")
        out.flush()

    try:
        await asyncio.gather(*(one(s) for s in specs))
    finally:
        await client.close()
    out.write(json.dumps({"stats": asdict(client.stats)}) + "\n")
    out.flush()


def batch_line(settings: JudgeConfig, shard: list[CallSpec]) -> str:
    """One batch as the worker reads it: the settings (every field; no key: there is none in them) and the specs."""
    specs = [{"key": s.key, "messages": s.messages, "schema": s.schema} for s in shard]
    return json.dumps({"settings": asdict(settings), "specs": specs}) + "\n"


def settings_of(values: JSONObject) -> JudgeConfig:
    """A batch's ``settings`` read back in the worker (the derived ``endpoint`` is worked out again)."""
    given = {k: v for k, v in values.items() if k != "endpoint"}
    given["extra_body"] = tuple((k, v) for k, v in given.get("extra_body", ()))
    return JudgeConfig(**given)


def main() -> int:
    """A worker process: batches on stdin until it closes, answers on stdout."""
    out, sys.stdout = sys.stdout, sys.stderr  # the pipe carries the protocol only: stray prints go to stderr
    for line in sys.stdin:  # one batch a line, until the parent closes the pipe
        batch = json.loads(line)
        asyncio.run(_answer(settings_of(batch["settings"]), batch["specs"], out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
