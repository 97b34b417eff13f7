"""A local server that speaks the OpenAI chat-completions protocol, for tests, benchmarks and demos.

It answers POST /v1/chat/completions with deterministic, in-range scores for
the keys the request asks for (from the `response_format` JSON schema, or from
the JSON template in the system prompt when no schema is sent), after an
optional latency. Faults can be injected: HTTP 500, 429 with Retry-After,
answers slower than the client's timeout, garbage text, truncated JSON,
out-of-range scores, refusals, a non-JSON HTTP body, no schema support. It
counts requests and the most requests in flight at once, and keeps every
request body so tests can assert on exactly what a judge was sent.

    python -m eval_pipeline.devtools.openai_stub --port 8011 --latency-ms 100
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from eval_pipeline.devtools.net import free_port, wait_until_serving

TEMPLATE_RE = re.compile(r'"([A-Za-z0-9_]+)": <integer (\d+)-(\d+)>')
FAULTS = (
    "500",
    "429",
    "timeout",
    "garbage",
    "truncated",
    "out_of_range",
    "refusal",
    "http_garbage",
    "no_choices",
    "401_echo",
)


@dataclass
class StubState:
    latency_s: float = 0.0
    schema_support: bool = True
    retry_after_s: float = 0.2
    timeout_sleep_s: float = 5.0
    faults: deque = field(default_factory=deque)  # consumed one per request, before normal answers
    fault_rate: float = 0.0  # with fault_kind: a seeded share of requests fail this way
    fault_kind: str = "500"
    seed: int = 0
    requests: int = 0
    completions: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    bodies: list = field(default_factory=list)
    keep_bodies: bool = True  # tests assert on every request; a long-running server keeps none
    lock: threading.Lock = field(default_factory=threading.Lock)
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def reset_counts(self) -> None:
        with self.lock:
            self.requests = self.completions = self.max_in_flight = 0
            self.bodies.clear()


LIST_RE = re.compile(r'\{"([a-z_]+)": \["<string>"')
WORD_RE = re.compile(r"[A-Za-z][A-Za-z\-]{3,}")


def _list_request(body: dict) -> str | None:
    """The key of a list answer (extraction prompts), if the request asks for one."""
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema")
    if schema:
        for k, v in schema.get("properties", {}).items():
            if v.get("type") == "array":
                return k
        return None
    system = next((m["content"] for m in body.get("messages", []) if m.get("role") == "system"), "")
    m = LIST_RE.search(system)
    return m.group(1) if m else None


def _list_answer(body: dict) -> list[str]:
    user = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
    words = [w.lower() for w in WORD_RE.findall(user.split("BEGIN_SAMPLE_DATA", 1)[-1])]
    return list(
        dict.fromkeys(w for w in words if w.endswith(("ous", "ful", "ive", "ish", "ent", "ble", "ed", "ic", "ly")))
    )[:8]


def _keys(body: dict) -> tuple[str, dict[str, tuple[int, int]]]:
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema")
    if schema:
        container = next(k for k in schema["required"] if k != "rationale")
        props = schema["properties"][container]["properties"]
        return container, {k: (v["minimum"], v["maximum"]) for k, v in props.items()}
    system = next((m["content"] for m in body.get("messages", []) if m.get("role") == "system"), "")
    container = "answers" if '{"answers":' in system else "scores"
    return container, {k: (int(lo), int(hi)) for k, lo, hi in TEMPLATE_RE.findall(system)}


def _scores(body: dict, scales: dict[str, tuple[int, int]]) -> dict[str, int]:
    digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).digest()
    out = {}
    for i, (k, (lo, hi)) in enumerate(sorted(scales.items())):
        span = hi - lo
        # deterministic and skewed towards the upper middle, like real judges
        out[k] = lo + min(span, round((0.45 + 0.5 * digest[i % len(digest)] / 255) * span))
    return out


@dataclass
class Reply:
    code: int
    payload: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    delay_s: float = 0.0  # how long the server takes before answering

    def body(self) -> bytes:
        return self.raw if self.raw is not None else json.dumps(self.payload).encode()


def admit(state: StubState, body: dict) -> str | None:
    """Count a request in and pick its fault, if any."""
    with state.lock:
        state.requests += 1
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        if state.keep_bodies:
            state.bodies.append(body)
        fault = state.faults.popleft() if state.faults else None
        if fault is None and state.fault_rate and state.rng.random() < state.fault_rate:
            fault = state.fault_kind
    return fault


def release(state: StubState) -> None:
    with state.lock:
        state.in_flight -= 1


def reply(state: StubState, body: dict, fault: str | None, authorization: str) -> Reply:
    """The answer to one chat-completions request (transport-independent)."""
    if fault == "401_echo":  # like providers that echo the offending key back in the error message
        return Reply(
            401, {"error": {"message": f"Incorrect API key provided: {authorization}", "type": "invalid_request_error"}}
        )
    delay = state.latency_s
    if fault == "500":
        return Reply(500, {"error": {"message": "internal error", "type": "server_error"}}, delay_s=delay)
    if fault == "429":
        return Reply(
            429,
            {"error": {"message": "rate limited", "type": "rate_limit"}},
            headers={"Retry-After": f"{state.retry_after_s:g}"},
            delay_s=delay,
        )
    if fault == "timeout":
        delay += state.timeout_sleep_s
    if fault == "http_garbage":
        return Reply(200, raw=b"<html>502 Bad Gateway</html>", delay_s=delay)
    if body.get("response_format") and not state.schema_support:
        return Reply(
            400,
            {
                "error": {
                    "message": "response_format json_schema is not supported by this server",
                    "type": "invalid_request_error",
                }
            },
            delay_s=delay,
        )
    list_key = _list_request(body)
    if list_key:
        answer = json.dumps({list_key: _list_answer(body)})
    else:
        container, scales = _keys(body)
        scores = _scores(body, scales)
        if fault == "out_of_range" and scores:
            k = sorted(scores)[0]
            scores[k] = scales[k][1] + 4
        answer = json.dumps({container: scores, "rationale": "Deterministic stub judgement."})
    if fault == "garbage":
        answer = "I think this response is pretty good overall!"
    elif fault == "truncated":
        answer = answer[: len(answer) // 2]
    elif fault == "refusal":
        answer = "I'm sorry, but I can't evaluate this."
    elif not body.get("response_format"):
        answer = f"Here is my evaluation.\n```json\n{answer}\n```"
    with state.lock:
        state.completions += 1
    prompt_chars = sum(len(m.get("content") or "") for m in body.get("messages", []))
    payload = {
        "id": f"chatcmpl-stub-{state.requests}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "stub"),
        "choices": []
        if fault == "no_choices"
        else [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}],
        "usage": {
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": len(answer) // 4,
            "total_tokens": prompt_chars // 4 + len(answer) // 4,
        },
    }
    return Reply(200, payload, delay_s=delay)


MODELS = Reply(200, {"object": "list", "data": [{"id": "stub-judge", "object": "model"}]})
NOT_FOUND = Reply(404, {"error": {"message": "not found"}})
BAD_JSON = Reply(400, {"error": {"message": "invalid JSON body"}})


def make_handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stall

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, r: Reply) -> None:
            data = r.body()
            self.send_response(r.code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in r.headers.items():
                self.send_header(k, v)
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_GET(self) -> None:  # noqa: N802
            self._send(MODELS if self.path.rstrip("/").endswith("/models") else NOT_FOUND)

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(NOT_FOUND)
                return
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                self._send(BAD_JSON)
                return
            fault = admit(state, body)
            try:
                r = reply(state, body, fault, self.headers.get("Authorization", ""))
                if r.delay_s:
                    time.sleep(r.delay_s)
                self._send(r)
            finally:
                release(state)

    return Handler


def make_asgi_app(state: StubState) -> Callable[..., Awaitable[None]]:
    """The same server as an ASGI app, for uvicorn (uvloop + httptools): one event loop instead of a
    thread per connection, so the benchmark's endpoint costs little CPU and adds no GIL hand-off delay."""

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        chunks = []
        while True:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body"):
                break
        path = scope["path"].rstrip("/")
        counted = False
        if scope["method"] == "GET":
            r = MODELS if path.endswith("/models") else NOT_FOUND
        elif not path.endswith("/chat/completions"):
            r = NOT_FOUND
        else:
            try:
                body = json.loads(b"".join(chunks))
                fault = admit(state, body)
                counted = True
                auth = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
                r = reply(state, body, fault, auth)
            except json.JSONDecodeError:
                r = BAD_JSON
        try:
            if r.delay_s:
                await asyncio.sleep(r.delay_s)
            data = r.body()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
            headers += [(k.lower().encode(), v.encode()) for k, v in r.headers.items()]
            await send({"type": "http.response.start", "status": r.code, "headers": headers})
            await send({"type": "http.response.body", "body": data})
        finally:
            if counted:
                release(state)

    return app


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # listen backlog: the default 5 drops bursts of concurrent connects
    allow_reuse_address = True


class StubServer:
    """Start with `with StubServer() as s:`; `s.base_url` is the /v1 URL."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, state: StubState | None = None):
        self.state = state or StubState()
        self.httpd = _Server((host, port), make_handler(self.state))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> StubServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@dataclass(frozen=True)
class RunningStub:
    base_url: str
    pid: int


@contextmanager
def stub_process(*args: str) -> Iterator[RunningStub]:
    """The stub in a process of its own on a free port (CLI ``args``, e.g. "--asgi", "--latency-ms", "200");
    yields its /v1 base URL and pid once it answers, and stops it on exit."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "eval_pipeline.devtools.openai_stub", "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}/v1"
        wait_until_serving(f"{base}/models", proc, timeout_s=10)
        yield RunningStub(base, proc.pid)
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description="OpenAI-protocol stub judge server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument(
        "--no-schema", action="store_true", help="reject response_format like servers without structured output"
    )
    ap.add_argument("--fault-rate", type=float, default=0.0)
    ap.add_argument("--fault-kind", choices=FAULTS, default="500")
    ap.add_argument("--asgi", action="store_true", help="serve with uvicorn (uvloop + httptools) instead of threads")
    args = ap.parse_args()
    state = StubState(
        latency_s=args.latency_ms / 1000,
        schema_support=not args.no_schema,
        fault_rate=args.fault_rate,
        fault_kind=args.fault_kind,
        keep_bodies=False,
    )
    if args.asgi:
        import uvicorn

        print(f"listening on http://{args.host}:{args.port}/v1", flush=True)
        uvicorn.run(
            make_asgi_app(state),
            host=args.host,
            port=args.port,
            log_level="warning",
            access_log=False,
            backlog=2048,
            lifespan="off",
        )
        return
    server = StubServer(args.host, args.port, state)
    print(f"listening on {server.base_url}", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        print(
            f"requests={state.requests} completions={state.completions} max_in_flight={state.max_in_flight}", flush=True
        )


if __name__ == "__main__":
    main()
