"""Starting the local model server: a server a signal kills at start is started once more on the safer CPU path;
one that dies again is refused with both attempts named (a real process standing in for llama-server)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from eval_pipeline.devtools import llama

FAKE = """#!{python}
import http.server, os, signal, sys
args = sys.argv[1:]
with open({calls!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
if {crash_always} or "--no-repack" not in args:
    print("llama threadpool init, n_threads = 1", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)
port = int(args[args.index("--port") + 1])

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{{}}")

    def log_message(self, *a):
        pass

http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_always: bool) -> Path:
    calls = tmp_path / "calls.txt"
    binary = tmp_path / "llama-server"
    binary.write_text(FAKE.format(python=sys.executable, calls=str(calls), crash_always=crash_always))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(llama, "build_server", lambda: binary)
    monkeypatch.setattr(llama, "model_file", lambda: tmp_path / "model.gguf")
    return calls


def test_a_server_killed_by_a_signal_at_start_is_started_again_without_repacking(tmp_path, monkeypatch):
    calls = _fake(tmp_path, monkeypatch, crash_always=False)
    server = llama.start(slots=1)
    try:
        assert server.process.poll() is None
        tried = calls.read_text().splitlines()
        assert len(tried) == 2
        assert "--no-repack" not in tried[0] and "--no-repack --no-warmup" in tried[1]
    finally:
        server.stop()


def test_a_server_that_dies_again_is_refused_naming_both_attempts(tmp_path, monkeypatch):
    calls = _fake(tmp_path, monkeypatch, crash_always=True)
    with pytest.raises(llama.BuildFailed) as err:
        llama.start(slots=1)
    text = str(err.value)
    assert text.count("signal 11") == 2 and "with --no-repack --no-warmup" in text
    assert "threadpool init" in text  # each log's tail
    assert len(calls.read_text().splitlines()) == 2
