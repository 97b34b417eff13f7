"""The server-slots probe (``GET /props``) against real HTTP servers (#60): the key never leaves for another host,
and a server that trickles its answer cannot hold the run."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from eval_pipeline.judge.calls import advertised_slots, forget_endpoints

KEY = "sk-probe-SECRET-0123456789"


@contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _fresh():
    forget_endpoints()
    yield
    forget_endpoints()


def props(slots: int, seen: list[str | None] | None = None) -> type[http.server.BaseHTTPRequestHandler]:
    """A server whose /props says ``slots``; the Authorization header of each request it gets goes to ``seen``."""

    class Props(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            if seen is not None:
                seen.append(self.headers.get("Authorization"))
            body = b'{"total_slots": %d}' % slots
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Props


def test_a_server_that_advertises_slots_is_believed():
    with serving(props(4)) as url:
        assert advertised_slots(url + "/v1", KEY) == 4


def test_a_redirect_is_not_followed_and_the_key_stays_home():
    seen: list[str | None] = []
    with serving(props(9, seen)) as other:

        class Redirect(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                self.send_response(302)
                self.send_header("Location", other + "/props")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        with serving(Redirect) as url:
            assert advertised_slots(url + "/v1", KEY) is None
    assert seen == []  # the other host was never asked, with or without the key


def test_a_trickling_props_cannot_hold_the_run():
    closed = threading.Event()

    class Trickle(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                while True:  # one byte of header at a time, each well within a per-read time-out
                    self.wfile.write(b"X")
                    self.wfile.flush()
                    time.sleep(0.3)
            except OSError:
                closed.set()

        def log_message(self, *args):
            pass

    with serving(Trickle) as url:
        assert advertised_slots(url + "/v1", KEY) is None  # given up (the suite's time-out bounds a hang)
        assert closed.wait(10)  # and the connection closed under the trickle, not left open
