"""A local server that speaks the OpenAI chat-completions protocol, for tests, benchmarks and demos.

It answers POST /v1/chat/completions with deterministic, in-range scores for
the keys the request asks for (from the `response_format` JSON schema, or from
the JSON template in the system prompt when no schema is sent), after an
optional latency; and the Files and Batches API (stub_batches.py), whose batches are answered the same way.
Faults can be injected: HTTP 500, 429 with Retry-After,
answers slower than the client's timeout, garbage text, truncated JSON,
out-of-range scores, refusals, a non-JSON HTTP body, no schema support. It
counts requests and the most requests in flight at once, and keeps every
request body so tests can assert on exactly what a judge was sent.

    python -m eval_pipeline.devtools.openai_stub --port 8011 --latency-ms 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from eval_pipeline.core.types import JSONObject
from eval_pipeline.devtools import stub_batches
from eval_pipeline.devtools.net import free_port, wait_until_serving
from eval_pipeline.devtools.stub_answers import (  # noqa: F401 (re-exported for tests)
    BAD_JSON,
    FAULTS,
    MODELS,
    NOT_FOUND,
    Reply,
    StubState,
    admit,
    answer_keys,
    answer_scores,
    release,
    reply,
)


def make_handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    if state.desk is None:
        state.desk = stub_batches.BatchDesk()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stall

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _send(self, r: Reply) -> None:
            data = r.body()
            self.send_response(r.code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(64 * 1024**3 if r.endless else len(data)))
            for k, v in r.headers.items():
                self.send_header(k, v)
            self.end_headers()
            try:
                if r.endless:  # until the client hangs up
                    while True:
                        self.wfile.write(r.endless * 64)
                elif r.drip_s > 0:  # a little at a time: every read is quick, the whole answer is not
                    for i in range(0, len(data), r.drip_bytes):
                        self.wfile.write(data[i : i + r.drip_bytes])
                        self.wfile.flush()
                        time.sleep(r.drip_s)
                else:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _batch_api(self, method: str, raw: bytes = b"") -> bool:
            """A Files or Batches request answered (stub_batches); False for any other path."""
            r = stub_batches.handle(state.desk, state, method, self.path, self.headers, raw)
            if r is not None:
                self._send(r)
            return r is not None

        def do_GET(self) -> None:  # noqa: N802
            if self._batch_api("GET"):
                return
            if self.path.rstrip("/") == "/props" and state.advertise_slots and state.slots:
                self._send(Reply(200, {"total_slots": state.slots}))
                return
            self._send(MODELS if self.path.rstrip("/").endswith("/models") else NOT_FOUND)

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if self._batch_api("POST", raw):
                return
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
                if state.slots:  # a server with few slots (llama-server -np N): the rest wait their turn, and a
                    # request the client gave up on is still worked through, as a real server does
                    with state.slot_gate():
                        time.sleep(r.delay_s)
                elif r.delay_s:
                    time.sleep(r.delay_s)
                self._send(r)
            finally:
                release(state)

    return Handler


def make_asgi_app(state: StubState) -> Callable[..., Awaitable[None]]:
    """The same server as an ASGI app, for uvicorn (uvloop + httptools): one event loop instead of a
    thread per connection, so the benchmark's endpoint costs little CPU and adds no GIL hand-off delay."""

    async def app(scope: JSONObject, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
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

    def __exit__(self, *exc: object) -> None:
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
    ap.add_argument("--batch-upstream", help="answer Batch API lines by this /v1 server (e.g. llama.cpp's)")
    ap.add_argument("--batch-line-ms", type=float, default=0.0, help="how long each Batch API line takes")
    args = ap.parse_args()
    state = StubState(
        latency_s=args.latency_ms / 1000,
        schema_support=not args.no_schema,
        fault_rate=args.fault_rate,
        fault_kind=args.fault_kind,
        keep_bodies=False,
        desk=stub_batches.BatchDesk(upstream=args.batch_upstream, line_s=args.batch_line_ms / 1000),
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
