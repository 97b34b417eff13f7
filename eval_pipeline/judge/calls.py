"""How a batch of prompts is asked: how many calls at once (never more than the server says it serves), and in how
many processes.

One event loop drives about 300 calls a second before the `openai` client's own CPU (2-3 ms a call) becomes the
limit, so at high concurrency against a fast endpoint the calls are spread over ``settings.processes`` worker
processes (judge.workers: fresh interpreters, started once and reused). Either way the batch goes to the client
once (judge.client.answer_all), which folds in what the workers answered, asks again what could not be used, and
gives back every outcome.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
from dataclasses import replace
from urllib.parse import urlsplit

from eval_pipeline.core import settings as env_settings
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.judge import costs, workers
from eval_pipeline.judge.client import CallOutcome, CallSpec, ClientStats, OnAnswer, answer_all, forget_learnt

MIN_CALLS_PER_PROCESS = 256  # a worker (its own client, new connections) pays off over many waves of calls
CALLS_PER_PROCESS_CONCURRENCY = 24  # calls in flight per process: answers arrive in bursts, keep each loop light

_ADVERTISED: dict[str, int | None] = {}
_ADVERTISED_LOCK = threading.Lock()
HOSTED = ("openai.com", "azure.com", "anthropic.com", "googleapis.com")  # no capacity endpoint: never probed


def forget_endpoints() -> None:
    """Start from the configured values again (a test, or a server restarted with more slots): what servers
    advertised and what clients learnt (judge.client.learnt)."""
    with _ADVERTISED_LOCK:
        _ADVERTISED.clear()
    forget_learnt()


PROBE_SECONDS = 2.0  # the whole /props probe: connect, headers and body, however slowly a server trickles them
PROBE_BYTES = 65536


def advertised_slots(endpoint: str, api_key: str | None = None) -> int | None:
    """How many requests the server says it serves at once, asked once per endpoint and process: llama.cpp's
    ``GET /props`` (``total_slots``, the ``-np`` it was started with) beside the ``/v1`` base URL. None when it
    says nothing (another server, a hosted API, a redirect, no whole answer within ``PROBE_SECONDS`` in all, a
    body past ``PROBE_BYTES``). A redirect is never followed: the key goes to the configured host only."""
    with _ADVERTISED_LOCK:
        if endpoint in _ADVERTISED:
            return _ADVERTISED[endpoint]
    slots: int | None = None
    parts = urlsplit(endpoint)
    if parts.scheme in ("http", "https") and not (parts.hostname or "").endswith(HOSTED):
        slots = _probe(endpoint, api_key)
    with _ADVERTISED_LOCK:
        _ADVERTISED[endpoint] = slots
    return slots


def _probe(endpoint: str, api_key: str | None) -> int | None:
    """``total_slots`` from ``GET <root>/props`` over one connection (http.client: no redirect followed), in a
    thread given ``PROBE_SECONDS`` in all; past it the connection is closed under it and the answer is None."""
    import http.client

    parts = urlsplit(endpoint)
    root = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path.rstrip("/")
    conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_type(parts.hostname or "", parts.port, timeout=PROBE_SECONDS)
    found: list[int | None] = [None]

    def ask() -> None:
        try:
            headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
            conn.request("GET", root + "/props", headers=headers)
            response = conn.getresponse()
            if response.status != 200:
                return
            body = response.read(PROBE_BYTES + 1)
            if len(body) > PROBE_BYTES:
                return
            data = json.loads(body)
            value = data.get("total_slots") if isinstance(data, dict) else None
            found[0] = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        except Exception:  # noqa: BLE001 - an abandoned probe's connection closed under it fails in many ways
            found[0] = None  # (AttributeError on the closed socket, ...): no answer, and no traceback printed

    worker = threading.Thread(target=ask, name="slots-probe", daemon=True)
    worker.start()
    worker.join(PROBE_SECONDS)
    alive = worker.is_alive()
    sock = conn.sock
    if sock is not None:  # shut down, not only closed: the response's reader still holds the socket open
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    conn.close()  # a server still trickling loses its connection: the thread's read fails and it ends
    return None if alive else found[0]


def worker_processes(settings: JudgeConfig, calls: int) -> int:
    """How many processes to use: ``settings.processes`` if set (>0), else one per 24 calls in flight
    (at most two per core: the workers mostly wait, but their answers arrive in bursts), and only when
    each gets enough calls to repay its start-up. One while a budget is drawn on: request by request, by this
    process's one client."""
    if costs.current() is not None:
        return 1
    if settings.processes > 0:
        n = settings.processes
    else:
        n = min(2 * (os.cpu_count() or 1), math.ceil(settings.concurrency / CALLS_PER_PROCESS_CONCURRENCY))
    return max(1, min(n, calls // MIN_CALLS_PER_PROCESS, settings.concurrency))


def call_specs(
    settings: JudgeConfig, specs: list[CallSpec], on_answer: OnAnswer | None = None
) -> tuple[dict[str, CallOutcome], ClientStats]:
    """Outcome per spec key, and the client statistics. ``on_answer`` sees every final outcome as it arrives.
    Never more calls in flight, over all worker processes, than the slots the server advertises."""
    slots = advertised_slots(settings.endpoint, env_settings.openai_api_key()) if specs else None
    if slots is not None:
        settings = replace(settings, concurrency=min(slots, settings.concurrency), server_slots=slots)
    n = worker_processes(settings, len(specs))
    first = workers.fan_out(settings, specs, n) if n > 1 else None
    return answer_all(settings, specs, on_answer, first)
