"""The real-model tier's downloads (eval_pipeline.devtools.llama.fetch) against a local registry: two processes that
want one file download it once (the session's background build and the tier's first test, writing one .part file
at once, failed each other's download and a CI-like run lost its whole tier), a body cut short is fetched again
(http.client ends one without an error), a file that stays different is refused with what was seen."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eval_pipeline.devtools import llama, llama_build

PAYLOAD = b"model weights " * 5000


class Registry:
    """A simple-API registry of one package whose file is cut short for the first ``short`` downloads."""

    def __init__(self, short: int, payload: bytes = PAYLOAD, pause_s: float = 0.0):
        self.short, self.payload, self.downloads, self.pause_s = short, payload, 0, pause_s
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                if self.path.startswith("/simple/"):
                    url = f"http://127.0.0.1:{self.server.server_port}/files/pkg-1.0-py3-none-any.whl"
                    body = json.dumps({"files": [{"filename": "pkg-1.0-py3-none-any.whl", "url": url}]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                registry.downloads += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(registry.payload)))
                self.end_headers()
                cut = registry.downloads <= registry.short
                self.wfile.write(registry.payload[:100])
                self.wfile.flush()
                time.sleep(registry.pause_s)  # the download under way while another process asks for it
                self.wfile.write(registry.payload[100 : len(registry.payload) // 3] if cut else registry.payload[100:])
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def index(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/simple"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_LLAMA_CACHE", str(tmp_path))
    monkeypatch.setattr(llama_build.time, "sleep", lambda s: None)
    return tmp_path


def test_a_download_cut_short_is_fetched_again(cache, monkeypatch):
    registry = Registry(short=1)
    monkeypatch.setenv("EVAL_PYPI_URL", registry.index)
    got = llama.fetch("pkg", "pkg-1.0-py3-none-any.whl", hashlib.sha256(PAYLOAD).hexdigest())
    assert got.read_bytes() == PAYLOAD and registry.downloads == 2
    assert not list(got.parent.glob("*.part"))
    registry.server.shutdown()


def test_a_file_that_stays_different_is_refused_with_what_was_seen(cache, monkeypatch):
    registry = Registry(short=10)
    monkeypatch.setenv("EVAL_PYPI_URL", registry.index)
    with pytest.raises(llama.BuildFailed) as failed:
        llama.fetch("pkg", "pkg-1.0-py3-none-any.whl", hashlib.sha256(PAYLOAD).hexdigest())
    said = str(failed.value)
    assert registry.downloads == 3 and "(3 attempts); refused" in said
    assert f"{len(PAYLOAD) // 3:,} bytes of {len(PAYLOAD):,}" in said and "not the pinned" in said
    assert not (cache / "downloads" / "pkg-1.0-py3-none-any.whl").exists()
    registry.server.shutdown()


def test_two_processes_wanting_one_file_download_it_once(cache, monkeypatch):
    registry = Registry(short=0, pause_s=0.5)
    monkeypatch.setenv("EVAL_PYPI_URL", registry.index)
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    got, errors = [], []

    def want() -> None:
        try:
            got.append(llama.fetch("pkg", "pkg-1.0-py3-none-any.whl", sha).read_bytes())
        except Exception as exc:  # noqa: BLE001 - the test reports what either one met
            errors.append(exc)

    threads = [threading.Thread(target=want) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and got == [PAYLOAD, PAYLOAD] and registry.downloads == 1
    registry.server.shutdown()
