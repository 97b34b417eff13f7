"""The local OpenAI-protocol server's Files and Batches API (openai_stub.py), as OpenAI's API reference defines
them: ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files`` (``purpose``, ``limit``, ``after``),
``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``; ``POST /v1/batches``, ``GET /v1/batches`` (``limit``,
``after``, newest first), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``.

A batch moves on a clock: ``validating`` for ``validate_s``, then ``in_progress`` while a thread answers its lines
one by one (``line_s`` each; the same answers and ``fault_when`` faults as the online endpoint, or forwarded to an
``upstream`` server such as llama.cpp's), ``finalizing`` for ``finalize_s``, then ``completed`` with its output
and error files. Faults on demand: lines that fail (``fail_marker`` in the prompt: a 400 in the error file), a
batch that expires after ``expire_after`` lines (the rest ``batch_expired`` in the error file), a batch that
fails validation (``fail_validation``), a provider that loses its batches (``lose``: 404) or answers 404 now and
then (``flicker``), one that keeps no metadata (``keep_metadata``), hostile ids (``odd_ids``), downloads that trickle
(``drip_s`` between 4 KiB chunks), and a client SIGKILLed at a chosen request (``kill``). Every prompt a
batch answered is counted by its ``custom_id`` (``answered``), so a
test sees whether one was ever answered twice.
"""

from __future__ import annotations

import dataclasses
import email.parser
import email.policy
import itertools
import json
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from eval_pipeline.core.types import JSONObject
from eval_pipeline.devtools.stub_answers import Reply, StubState, reply

NOT_FOUND = Reply(404, {"error": {"message": "No such object", "type": "invalid_request_error", "code": "not_found"}})


@dataclass
class BatchDesk:
    validate_s: float = 0.0
    line_s: float = 0.0
    finalize_s: float = 0.0
    expire_after: int | None = None  # lines answered before the batch expires (None: never)
    fail_validation: bool = False
    fail_marker: str | None = None  # a line whose prompt holds it fails with a 400
    echo_key: bool = False  # a hostile provider: its errors' codes and messages echo the request's key
    endless: bool = False  # a hostile provider: a file's content is lines of nothing asked, without end
    lose: bool = False  # the provider forgets every batch: GET answers 404
    flicker: int = 0  # the next this many GETs of a batch by its id answer 404 (the list still holds it)
    keep_metadata: bool = True  # False: a provider that keeps no batch metadata (lists and GETs show none)
    twice: bool = False  # a broken provider: each result line comes twice, the second a failure
    odd_ids: bool = False  # a hostile provider: a batch's id holds the request's key and terminal escapes
    drip_s: float = 0.0  # a file's content is sent 4 KiB at a time, this far apart
    upstream: str | None = None  # answer lines by POSTing them to this /v1 base URL (llama.cpp's server)
    files: dict[str, JSONObject] = field(default_factory=dict)
    batches: dict[str, JSONObject] = field(default_factory=dict)
    answered: Counter[str] = field(default_factory=Counter)  # a line's custom_id -> times answered
    routes: Counter[str] = field(default_factory=Counter)  # "POST /v1/files" -> requests
    # (route, "before" | "after" | "during", pid): that process is SIGKILLed when the route is next asked: before
    # the server acts, after it acted (the answer lost), or part-way through sending its answer; once
    kill: tuple[str, str, int] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: Any = field(default_factory=lambda: itertools.count(1))

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self.ids):06d}"


def _file(desk: BatchDesk, data: bytes, name: str, purpose: str) -> JSONObject:
    fid = desk.new_id("file")
    meta = {
        "id": fid,
        "object": "file",
        "bytes": len(data),
        "created_at": int(time.time()),
        "filename": name,
        "purpose": purpose,
        "status": "processed",
    }
    desk.files[fid] = {"meta": meta, "data": data}
    return meta


def _multipart(headers: Any, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body's fields: name -> (filename, bytes)."""
    head = f"Content-Type: {headers.get('Content-Type', '')}\r\n\r\n".encode()
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    out = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        out[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return out


def _page(items: list[JSONObject], query: dict[str, list[str]]) -> JSONObject:
    limit = int((query.get("limit") or ["20"])[0])
    after = query["after"][0] if query.get("after") else None
    if after is not None:
        ids = [i["id"] for i in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    page = items[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > limit,
    }


def _batch_view(b: JSONObject) -> JSONObject:
    return {k: v for k, v in b.items() if not k.startswith("_")}


def handle(desk: BatchDesk, state: StubState, method: str, path: str, headers: Any, raw: bytes) -> Reply | None:
    """The answer to a Files or Batches request; None for a path that is neither."""
    parts = urlsplit(path)
    route = parts.path.rstrip("/")
    query = parse_qs(parts.query)
    segs = route.split("/")[2:] if route.startswith("/v1/") else []
    if not segs or segs[0] not in ("files", "batches"):
        return None
    name = f"{method} /v1/{segs[0]}" + ("/{id}" if len(segs) > 1 else "") + ("/" + segs[2] if len(segs) > 2 else "")
    with desk.lock:
        desk.routes[name] += 1
        kill = desk.kill if desk.kill and desk.kill[0] == name else None
        if kill:
            desk.kill = None
    if kill and kill[1] == "before":
        _kill(kill[2])
    if segs[0] == "files":
        r = _files(desk, method, segs, query, headers, raw)
    else:
        r = _batches(desk, state, method, segs, query, headers, raw)
    if kill and kill[1] == "after":
        _kill(kill[2])
    elif kill and kill[1] == "during":  # part of the answer sent, then the client dies
        threading.Timer(0.3, _kill, args=(kill[2],)).start()
        r = dataclasses.replace(r, drip_s=0.1, drip_bytes=1024)
    return r


def _kill(pid: int) -> None:
    import os
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _files(
    desk: BatchDesk, method: str, segs: list[str], query: dict[str, list[str]], headers: Any, raw: bytes
) -> Reply:
    if method == "POST" and len(segs) == 1:
        fields = _multipart(headers, raw)
        name, data = fields.get("file", (None, b""))
        purpose = fields.get("purpose", (None, b""))[1].decode()
        with desk.lock:
            return Reply(200, _file(desk, data, name or "upload.jsonl", purpose))
    if method == "GET" and len(segs) == 1:
        with desk.lock:
            items = [f["meta"] for f in desk.files.values()]
        wanted = query["purpose"][0] if query.get("purpose") else None
        items = [i for i in items if wanted is None or i["purpose"] == wanted]
        return Reply(200, _page(sorted(items, key=lambda i: i["id"], reverse=True), query))
    found = desk.files.get(segs[1]) if len(segs) > 1 else None
    if found is None:
        return NOT_FOUND
    if len(segs) == 2:
        return Reply(200, found["meta"])
    if desk.endless:
        return Reply(200, raw=b"", endless=b'{"custom_id": "not-asked", "response": null, "error": null}\n')
    return Reply(200, raw=found["data"], drip_s=desk.drip_s, drip_bytes=4096)


def _batches(
    desk: BatchDesk,
    state: StubState,
    method: str,
    segs: list[str],
    query: dict[str, list[str]],
    headers: Any,
    raw: bytes,
) -> Reply:
    if method == "POST" and len(segs) == 1:
        body = json.loads(raw or b"{}")
        source = desk.files.get(str(body.get("input_file_id")))
        if source is None:
            return Reply(400, {"error": {"message": "input_file_id not found", "type": "invalid_request_error"}})
        now = int(time.time())
        with desk.lock:
            bid = desk.new_id("batch")
            if desk.odd_ids:
                bid += "\x1b[2J\r" + headers.get("Authorization", "").removeprefix("Bearer ") + "x" * 300
            lines = [json.loads(ln) for ln in source["data"].decode().splitlines() if ln.strip()]
            b = desk.batches[bid] = {
                "id": bid,
                "object": "batch",
                "endpoint": body.get("endpoint"),
                "errors": None,
                "input_file_id": body["input_file_id"],
                "completion_window": body.get("completion_window", "24h"),
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": now,
                "in_progress_at": None,
                "expires_at": now + 86400,
                "finalizing_at": None,
                "completed_at": None,
                "failed_at": None,
                "expired_at": None,
                "cancelling_at": None,
                "cancelled_at": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": body.get("metadata") if desk.keep_metadata else None,
                "_lines": lines,
                "_auth": headers.get("Authorization", ""),
                "_cancel": False,
            }
            created = _batch_view(b)  # as created ("validating"), as a provider answers: not what the work did since
        threading.Thread(target=_work, args=(desk, state, b), daemon=True).start()
        return Reply(200, created)
    if method == "GET" and len(segs) == 1:
        with desk.lock:
            items = [] if desk.lose else [_batch_view(b) for b in desk.batches.values()]
        return Reply(200, _page(sorted(items, key=lambda i: i["id"], reverse=True), query))
    with desk.lock:
        flicker = method == "GET" and len(segs) == 2 and desk.flicker > 0
        desk.flicker -= 1 if flicker else 0
    found = None if desk.lose or flicker else desk.batches.get(segs[1])
    if found is None:
        return NOT_FOUND
    b = found
    if len(segs) == 3 and segs[2] == "cancel" and method == "POST":
        with desk.lock:
            if b["status"] in ("validating", "in_progress", "finalizing"):
                b["_cancel"] = True
                b["status"], b["cancelling_at"] = "cancelling", int(time.time())
        return Reply(200, _batch_view(b))
    return Reply(200, _batch_view(b))


def _answer(desk: BatchDesk, state: StubState, body: JSONObject, auth: str) -> tuple[int, Any]:
    if desk.upstream:
        req = urllib.request.Request(
            desk.upstream.rstrip("/") + "/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=600) as resp:  # noqa: S310 - a local test server
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, {"error": {"message": exc.read().decode(errors="replace")[:300]}}
    prompt = json.dumps(body.get("messages", ""))
    fault = next((f for marker, f in state.fault_when.items() if marker in prompt), None)
    r = reply(state, body, fault, auth)
    if r.raw is not None:
        return r.code, r.raw.decode(errors="replace")
    return r.code, r.payload


def _echoed(desk: BatchDesk, b: JSONObject) -> str:
    """The request's key, when the desk plays a provider that echoes it (``echo_key``); else nothing."""
    return str(b["_auth"]).removeprefix("Bearer ") if desk.echo_key else ""


def _validated(desk: BatchDesk, b: JSONObject) -> bool:
    """The batch validated (in progress, unless cancelled meanwhile), or failed validation when the desk says so
    (its error echoing the key when the desk is hostile)."""
    with desk.lock:
        if desk.fail_validation:
            b["status"], b["failed_at"] = "failed", int(time.time())
            key = _echoed(desk, b)
            error = {"code": f"invalid_request{key}", "message": f"validation failed for {key}", "line": 1}
            b["errors"] = {"object": "list", "data": [{**error, "param": key or None}]}
            return False
        if not b["_cancel"]:
            b["status"], b["in_progress_at"] = "in_progress", int(time.time())
    return True


def _work(desk: BatchDesk, state: StubState, b: JSONObject) -> None:
    """The batch's life: validated, its lines answered one by one, finalized, its files written."""
    time.sleep(desk.validate_s)
    if not _validated(desk, b):
        return
    out, err = [], []
    ended = None
    for i, line in enumerate(b["_lines"]):
        if b["_cancel"]:
            ended = "cancelled"
            break
        if desk.expire_after is not None and i >= desk.expire_after:
            ended = "expired"
            break
        time.sleep(desk.line_s)
        body = line.get("body") or {}
        rid = f"batch_req_{b['id']}_{i}"
        if desk.fail_marker and desk.fail_marker in json.dumps(body.get("messages", "")):
            key = _echoed(desk, b)
            refused = {"message": f"this line is refused{key}", "type": "invalid_request_error", "code": key or None}
            code, payload = 400, {"error": refused}
        else:
            code, payload = _answer(desk, state, body, b["_auth"])
        entry = {
            "id": rid,
            "custom_id": line.get("custom_id"),
            "response": {"status_code": code, "request_id": rid, "body": payload},
            "error": None,
        }
        with desk.lock:
            if code == 200:
                desk.answered[str(line.get("custom_id"))] += 1
                b["request_counts"]["completed"] += 1
                out.append(entry)
                if desk.twice:
                    out.append({**entry, "response": {"status_code": 500, "request_id": rid, "body": {}}})
            else:
                b["request_counts"]["failed"] += 1
                err.append(entry)
    if ended == "expired":
        for line in b["_lines"][len(out) + len(err) :]:
            err.append(
                {
                    "id": desk.new_id("batch_req"),
                    "custom_id": line.get("custom_id"),
                    "response": None,
                    "error": {
                        "code": "batch_expired",
                        "message": "This request could not be executed before the completion window expired.",
                    },
                }
            )
    if ended is None:
        with desk.lock:
            b["status"], b["finalizing_at"] = "finalizing", int(time.time())
        time.sleep(desk.finalize_s)
    with desk.lock:
        if out:
            b["output_file_id"] = _file(
                desk, "".join(json.dumps(e) + "\n" for e in out).encode(), f"{b['id']}_output.jsonl", "batch_output"
            )["id"]
        if err:
            b["error_file_id"] = _file(
                desk, "".join(json.dumps(e) + "\n" for e in err).encode(), f"{b['id']}_error.jsonl", "batch_output"
            )["id"]
        now = int(time.time())
        status = ended or "completed"
        b["status"] = status
        b[f"{status}_at"] = now
