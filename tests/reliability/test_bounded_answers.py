"""Judge answers bounded in memory (#60): a gzip bomb (0.5 MB that decodes to 64 MB) and a 200 answer that never
ends are each a missing score with its reason, read no further than the bound, from a real HTTP server."""

from __future__ import annotations

import http.server
import json
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from eval_pipeline.judge.bounded_http import MAX_BODY_BYTES
from eval_pipeline.judge.runner import judge_samples
from eval_pipeline.storage.warehouse import Warehouse
from tests.helpers.judges import openai_judge

DECODED = 8 * MAX_BODY_BYTES


def _bomb() -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
    head += b'"finish_reason": "stop", "message": {"role": "assistant", "content": "'
    out = [z.compress(head)]
    block = b" " * (1 << 20)
    out += [z.compress(block) for _ in range(DECODED >> 20)]
    out.append(z.compress(b'"}}]}') + z.flush())
    return b"".join(out)


@contextmanager
def serving(kind: str) -> Iterator[tuple[str, dict[str, int]]]:
    seen = {"requests": 0, "sent": 0}
    bomb = _bomb() if kind == "bomb" else b""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            seen["requests"] += 1
            try:
                if kind == "bomb":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Encoding", "gzip")
                    self.send_header("Content-Length", str(len(bomb)))
                    self.end_headers()
                    self.wfile.write(bomb)
                    seen["sent"] += len(bomb)
                else:  # endless: a 200 whose body never ends
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    chunk = b" " * 65536
                    while True:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        seen["sent"] += len(chunk)
            except OSError:
                pass  # the client stopped reading: as it should

        def do_GET(self):  # noqa: N802 - no /props
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("kind", ["bomb", "endless"])
def test_an_answer_past_the_bound_is_a_missing_score_read_no_further(rubrics, monkeypatch, tmp_path, kind):
    rubric = rubrics["empathetic_dialogue"]
    records = [dict(sample_id="s0", topic="t", user_statement="I feel low.", response="Hm.")]
    with serving(kind) as (url, seen):
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-bounded-0000")
        monkeypatch.setenv("EVAL_JUDGE_TIMEOUT", "20")
        monkeypatch.setenv("EVAL_JUDGE_MAX_RETRIES", "0")
        df, _ = judge_samples(rubric, "c", records, Warehouse(str(tmp_path / "w.duckdb")), config=openai_judge())
    assert len(df) and df.score.isna().all()
    assert df.reason.str.contains(f"past {MAX_BODY_BYTES:,} bytes").all(), json.dumps(df.reason.tolist())
    if kind == "endless":
        # the client stopped reading near the bound, not after gigabytes
        assert seen["sent"] < 64 * MAX_BODY_BYTES
