"""The judge cache (`main.judge_cache`): one row per answered prompt.

The key is the SHA-256 of the judge model, its sampling parameters, the rubric's
judge version (the hash of everything in the rubric the judge sees) and the full prompt, so a re-run, a backfill
or a new checkpoint that
repeats a sample makes no repeated call, and a rubric edit changes every key.
Only parseable answers are cached: transport failures and unparseable answers
are asked again on the next run. Reads happen before the calls and writes after
them, so no connection is held while waiting on the endpoint; answers are written by a background
thread in batches (:class:`BackgroundWriter`), so the event loop that drives the calls never waits on the file.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from eval_pipeline.core.contracts import JUDGE_CACHE
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import JSONObject, Row
from eval_pipeline.judge.queries import cached_answers
from eval_pipeline.storage.warehouse import Warehouse

TABLE = JUDGE_CACHE


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


_ENCODED: dict[str, str] = {}  # JSON of long repeated strings (a rubric's system message), encoded once


def _encode_text(text: str) -> str:
    if len(text) < 2048:
        return _dumps(text)
    if text not in _ENCODED:
        if len(_ENCODED) > 64:
            _ENCODED.clear()
        _ENCODED[text] = _dumps(text)
    return _ENCODED[text]


def cache_key(
    settings: JudgeConfig,
    rubric_version: str,
    messages: list[dict[str, str]],
    schema: JSONObject | None,
    repeat: int = 0,
) -> str:
    """The key of asking ``settings``' judge ``messages`` under ``schema``: who answers (the endpoint, or the identity
    the panel gives it when several endpoints serve the same judge), the model and its sampling parameters, the
    rubric's judge version and the prompt. ``repeat`` > 0: a repeat scoring of the same prompt, its own key (so it
    is asked again). A parameter left at its default adds nothing, so the keys of every answer cached before it
    existed stay the same."""
    params: JSONObject = {
        "endpoint": settings.identity or settings.endpoint,
        "model": settings.model,
        "temperature": settings.temperature,
        "seed": settings.seed,
        "max_tokens": settings.max_tokens,
    }
    if settings.top_logprobs:
        params["top_logprobs"] = settings.top_logprobs
    if settings.extra_body:  # they change answers
        params["extra_body"] = dict(settings.extra_body)
    if repeat:
        params["repeat"] = repeat
    return _digest(params, rubric_version, messages, schema)


def _digest(params: JSONObject, rubric_version: str, messages: list[dict[str, str]], schema: JSONObject | None) -> str:
    """SHA-256 of the canonical JSON (sorted keys, compact) of params, rubric version, messages and schema."""
    if all(isinstance(m, dict) and m.keys() == {"role", "content"} and isinstance(m["content"], str) for m in messages):
        # the same bytes as _dumps of the whole blob, without re-encoding the long system message every call
        msgs = ",".join(f'{{"content":{_encode_text(m["content"])},"role":{_dumps(m["role"])}}}' for m in messages)
        blob = (
            f'{{"messages":[{msgs}],"params":{_dumps(params)},"rubric_version":{_dumps(rubric_version)},'
            f'"schema":{_dumps(schema)}}}'
        )
    else:
        blob = _dumps({"params": params, "rubric_version": rubric_version, "messages": messages, "schema": schema})
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def lookup(wh: Warehouse, keys: list[str]) -> dict[str, Row]:
    cols = wh.columns(*TABLE) if keys else {}
    if not cols:  # nothing asked, or no cache yet
        return {}
    df = cached_answers(wh, list(set(keys)), cols)
    return {r.cache_key: {**r._asdict(), "usable": bool(r.usable)} for r in df.itertuples(index=False)}


def store(wh: Warehouse, rows: list[Row]) -> int:
    if not rows:
        return 0
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    df = pd.DataFrame(rows)
    df["created_at"] = now
    return wh.upsert_rows(*TABLE, df, key=["cache_key"])


class BackgroundWriter:
    """Stores cache rows from a thread of its own, in batches, while the calls go on.

    A batch is written when ``max_rows`` answers are pending or ``max_delay_s`` after the first of them
    arrived, each write a short transaction on a connection of its own; so a run killed mid-way loses at
    most the last ``max_delay_s`` of answers, and the event loop never blocks on DuckDB. Leaving the
    ``with`` block writes what is left and re-raises a write error.
    """

    def __init__(self, wh: Warehouse, max_rows: int = 256, max_delay_s: float = 0.5):
        self._wh = wh
        self._max_rows = max_rows
        self._max_delay_s = max_delay_s
        self._pending: list[Row] = []
        self._first_at: float | None = None
        self._cond = threading.Condition()
        self._writing = False  # the thread is writing a batch it took (flush waits for it)
        self._closing = False
        self._error: BaseException | None = None
        self.rows_written = 0
        self.batches = 0
        self._thread = threading.Thread(target=self._run, name="judge-cache-writer", daemon=True)

    def __enter__(self) -> BackgroundWriter:
        return self  # the thread starts with the first answer

    def add(self, row: Row) -> None:
        with self._cond:
            if self._thread.ident is None:  # not started yet
                self._thread.start()
            if self._error is not None:
                raise RuntimeError(f"judge cache write failed: {self._error}") from self._error
            self._pending.append(row)
            if self._first_at is None:  # the writer sleeps until a batch starts; it now waits at most max_delay_s
                self._first_at = time.monotonic()
                self._cond.notify()
            elif len(self._pending) >= self._max_rows:
                self._cond.notify()

    def flush(self) -> None:
        """Every row added so far written before this returns (a write error raised here)."""
        with self._cond:
            batch, self._pending, self._first_at = self._pending, [], None
            self._cond.wait_for(lambda: not self._writing)  # the thread's write in flight, ended
            if self._error is not None:
                raise RuntimeError(f"judge cache write failed: {self._error}") from self._error
        if batch:
            self.rows_written += store(self._wh, batch)
            self.batches += 1

    def _take(self) -> list[Row] | None:
        """The next batch to write, or None when closing with nothing left."""
        with self._cond:
            while True:
                if self._pending and (
                    self._closing
                    or len(self._pending) >= self._max_rows
                    or time.monotonic() - (self._first_at or 0) >= self._max_delay_s
                ):
                    batch, self._pending, self._first_at = self._pending, [], None
                    self._writing = True
                    return batch
                if self._closing:
                    return None
                timeout = None
                if self._pending and self._first_at is not None:
                    timeout = max(0.0, self._max_delay_s - (time.monotonic() - self._first_at))
                self._cond.wait(timeout)

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            try:
                self.rows_written += store(self._wh, batch)
                self.batches += 1
            except BaseException as exc:  # reported to the caller on add() or exit
                with self._cond:
                    self._error = exc
                    self._writing = False
                    self._cond.notify_all()
                return
            with self._cond:
                self._writing = False
                self._cond.notify_all()

    def __exit__(self, *exc_info: object) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread.ident is not None:
            self._thread.join()
        if self._error is not None and exc_info[0] is None:
            raise RuntimeError(f"judge cache write failed: {self._error}") from self._error
