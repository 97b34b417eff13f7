"""What the local OpenAI-protocol server answers: deterministic in-range scores for the keys a request asks for,
and the injected faults (see openai_stub.py)."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eval_pipeline.core.types import JSONObject

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
    "429_echo",
    "drip",
    "key_escaped",
    "key_plain",
    "key_alternative",
    "context_full",
)


@dataclass
class StubState:
    latency_s: float = 0.0
    schema_support: bool = True
    retry_after_s: float = 0.2
    retry_after_header: str | None = None  # sent as is in Retry-After when set ("soon", "30s", a date)
    drip_interval_s: float = 0.5  # "drip": the answer's bytes one at a time, this far apart
    timeout_sleep_s: float = 5.0
    faults: deque[str | None] = field(default_factory=deque)  # one per request, before normal answers (None: none)
    fault_rate: float = 0.0  # with fault_kind: a seeded share of requests fail this way
    fault_kind: str = "500"
    fault_when: dict[str, str] = field(
        default_factory=dict
    )  # marker text -> fault for every request whose prompt holds it
    seed: int = 0
    score_noise: float = 0.0  # each score moves one step (inwards at the scale's ends) with this probability
    slots: int = 0  # > 0: at most this many requests are worked on at once (each for latency_s); the rest queue
    advertise_slots: bool = False  # GET /props says total_slots, as llama-server does
    tokens_per_char: float = 0.25  # the prompt tokens reported per character (a denser tokenizer reports more)
    # (answering_s, stalled_s): the server answers for answering_s, then answers nothing for stalled_s, and so on
    # from its first request; a request whose answer would fall in a stall is answered when the stall ends (latency
    # that oscillates, as a server shared with other work, or a machine under heavy load, shows it)
    stalls: tuple[float, float] | None = None
    first_request: float | None = None
    _slot_sem: threading.Semaphore | None = None
    requests: int = 0
    completions: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    bodies: list[Any] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # when each kept request arrived (time.monotonic)
    keep_bodies: bool = True  # tests assert on every request; a long-running server keeps none
    lock: threading.Lock = field(default_factory=threading.Lock)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    desk: Any = None  # the Files and Batches API's state (stub_batches.BatchDesk), made with the first server
    # a judge of the test's own making (in-process servers): the request body and the scales asked for -> the
    # scores to answer (None: the deterministic ones), e.g. one that answers better under one instruction variant
    scorer: Callable[[JSONObject, dict[str, tuple[int, int]]], dict[str, int] | None] | None = None

    def slot_gate(self) -> threading.Semaphore:
        with self.lock:
            if self._slot_sem is None:
                self._slot_sem = threading.Semaphore(self.slots)
        return self._slot_sem

    def reset_counts(self) -> None:
        with self.lock:
            self.requests = self.completions = self.max_in_flight = 0
            self.bodies.clear()
            self.arrivals.clear()


LIST_RE = re.compile(r'\{"([a-z_]+)": \["<string>"')
WORD_RE = re.compile(r"[A-Za-z][A-Za-z\-]{3,}")


def _list_request(body: JSONObject) -> str | None:
    """The key of a list answer (extraction prompts), if the request asks for one."""
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema")
    if schema:
        for k, v in schema.get("properties", {}).items():
            if v.get("type") == "array":
                return str(k)
        return None
    system = next((m["content"] for m in body.get("messages", []) if m.get("role") == "system"), "")
    m = LIST_RE.search(system)
    return m.group(1) if m else None


def _list_answer(body: JSONObject) -> list[str]:
    user = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
    words = [w.lower() for w in WORD_RE.findall(user.split("BEGIN_SAMPLE_DATA", 1)[-1])]
    return list(
        dict.fromkeys(w for w in words if w.endswith(("ous", "ful", "ive", "ish", "ent", "ble", "ed", "ic", "ly")))
    )[:8]


def answer_keys(body: JSONObject) -> tuple[str, dict[str, tuple[int, int]]]:
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema")
    if schema:
        container = next(k for k in schema["required"] if k != "rationale")
        props = schema["properties"][container]["properties"]
        return container, {k: (v["minimum"], v["maximum"]) for k, v in props.items()}
    system = next((m["content"] for m in body.get("messages", []) if m.get("role") == "system"), "")
    container = "answers" if '{"answers":' in system else "scores"
    return container, {k: (int(lo), int(hi)) for k, lo, hi in TEMPLATE_RE.findall(system)}


def answer_scores(body: JSONObject, scales: dict[str, tuple[int, int]]) -> dict[str, int]:
    digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).digest()
    out = {}
    for i, (k, (lo, hi)) in enumerate(sorted(scales.items())):
        span = hi - lo
        # deterministic and skewed towards the upper middle, like real judges
        out[k] = lo + min(span, round((0.45 + 0.5 * digest[i % len(digest)] / 255) * span))
    return out


def _noisy(state: StubState, scores: dict[str, int], scales: dict[str, tuple[int, int]]) -> dict[str, int]:
    """A judge that is not repeatable: each score one step off its deterministic value with probability
    ``score_noise`` (up or down at random, inwards at the ends of the scale), drawn per request."""
    out = dict(scores)
    with state.lock:
        for k in sorted(out):
            if state.rng.random() < state.score_noise:
                lo, hi = scales[k]
                step = -1 if out[k] >= hi else 1 if out[k] <= lo else state.rng.choice((-1, 1))
                out[k] += step
    return out


SCORE_AT = re.compile(r'"([A-Za-z0-9_]+)":\s*(\d+)')
NEIGHBOURS = ((0, 0.6), (-1, 0.25), (1, 0.15))  # the written score, one below, one above (where on the scale)
OTHER = 0.05  # a token that is no number at all (renormalised away by the reader)


def stub_distribution(value: int, lo: int, hi: int) -> dict[str, float]:
    """What the stub's score token's top alternatives are: a known distribution around the written score."""
    out = {str(value + d): w for d, w in NEIGHBOURS if lo <= value + d <= hi}
    out['"'] = OTHER
    return out


def token_logprobs(answer: str, scales: dict[str, tuple[int, int]], top: int, piece: int = 0) -> JSONObject:
    """The answer as tokens (every number a token of its own; other text in runs, or in pieces of at most ``piece``
    characters, as a real tokenizer splits a key) with ``top`` alternatives each, as OpenAI's ``logprobs.content``;
    a score token's alternatives follow :func:`stub_distribution`."""
    scored = {m.start(2): m.group(1) for m in SCORE_AT.finditer(answer) if m.group(1) in scales}
    content, pos = [], 0
    runs = re.findall(r"\d+|[^\d]+", answer)
    if piece:
        runs = [
            t for r in runs for t in ([r] if r[0].isdigit() else [r[i : i + piece] for i in range(0, len(r), piece)])
        ]  # noqa: E501
    for tok in runs:
        key = scored.get(pos)
        if key is not None:
            dist = stub_distribution(int(tok), *scales[key])
        else:
            dist = {tok: 0.999}
        alts = sorted(dist.items(), key=lambda kv: -kv[1])[: max(1, top)]
        content.append(
            {
                "token": tok,
                "logprob": math.log(dist.get(tok, 1e-9)),
                "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in alts],
            }
        )
        pos += len(tok)
    return {"content": content}


def hide_in_alternatives(logprobs: JSONObject, key: str) -> JSONObject:
    """The key where no answer text shows it: whole as the second likeliest token of the first position, and in
    pieces of 3 as the second likeliest token of the positions after it (as a model that nearly wrote it)."""
    content = list(logprobs.get("content") or [])
    pieces = [key, *(key[i : i + 3] for i in range(0, len(key), 3))]
    for token, piece in zip(content, pieces):
        alts = list(token.get("top_logprobs") or [])
        alts.insert(1 if alts else 0, {"token": piece, "logprob": -3.0})
        token["top_logprobs"] = alts
    return {"content": content}


@dataclass
class Reply:
    code: int
    payload: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    delay_s: float = 0.0  # how long the server takes before answering
    drip_s: float = 0.0  # > 0: the body is sent ``drip_bytes`` at a time, this far apart
    drip_bytes: int = 1
    endless: bytes | None = None  # this line sent again and again, without end, instead of the body (a hostile file)

    def body(self) -> bytes:
        return self.raw if self.raw is not None else json.dumps(self.payload).encode()


def admit(state: StubState, body: JSONObject) -> str | None:
    """Count a request in and pick its fault, if any."""
    with state.lock:
        state.requests += 1
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        if state.keep_bodies:
            state.bodies.append(body)
            state.arrivals.append(time.monotonic())
        fault = state.faults.popleft() if state.faults else None
        if state.fault_when:
            prompt = json.dumps(body.get("messages", ""))
            fault = next((f for marker, f in state.fault_when.items() if marker in prompt), fault)
        if fault is None and state.fault_rate and state.rng.random() < state.fault_rate:
            fault = state.fault_kind
    return fault


def release(state: StubState) -> None:
    with state.lock:
        state.in_flight -= 1


# long by design: one branch per injected fault, side by side so the fault table reads as one list
def reply(state: StubState, body: JSONObject, fault: str | None, authorization: str) -> Reply:
    """The answer to one chat-completions request (transport-independent)."""
    if fault == "401_echo":  # like providers that echo the offending key back in the error message
        return Reply(
            401, {"error": {"message": f"Incorrect API key provided: {authorization}", "type": "invalid_request_error"}}
        )
    delay = state.latency_s
    if fault == "500":
        return Reply(500, {"error": {"message": "internal error", "type": "server_error"}}, delay_s=delay)
    if fault == "429_echo":  # a rate limit whose body echoes the key, with whatever Retry-After the test set
        header = state.retry_after_header if state.retry_after_header is not None else f"{state.retry_after_s:g}"
        return Reply(
            429,
            {"error": {"message": f"rate limited for key {authorization}", "type": "rate_limit"}},
            headers={"Retry-After": header},
            delay_s=delay,
        )
    if fault == "429":
        return Reply(
            429,
            {"error": {"message": "rate limited", "type": "rate_limit"}},
            headers={"Retry-After": f"{state.retry_after_s:g}"},
            delay_s=delay,
        )
    if fault == "timeout":
        delay += state.timeout_sleep_s
    if state.stalls is not None:
        answering, stalled = state.stalls
        with state.lock:
            state.first_request = state.first_request or time.monotonic()
        at = time.monotonic() - state.first_request + delay  # when it would be answered, from the first request
        into = at % (answering + stalled)
        if into >= answering:  # within a stall: at its end
            delay += answering + stalled - into
    drip = state.drip_interval_s if fault == "drip" else 0.0
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
        container, scales = answer_keys(body)
        scores = (state.scorer(body, scales) if state.scorer else None) or answer_scores(body, scales)
        if state.score_noise:
            scores = _noisy(state, scores, scales)
        if fault == "out_of_range" and scores:
            k = sorted(scores)[0]
            scores[k] = scales[k][1] + 4
        answer = json.dumps({container: scores, "rationale": "Deterministic stub judgement."})
    key = authorization.removeprefix("Bearer ").strip()
    if fault == "key_escaped" and not list_key:  # the key in the rationale, every character a JSON escape
        escaped = "".join(f"\\u{ord(c):04x}" if i % 2 else c for i, c in enumerate(key))
        answer = answer.replace('"Deterministic stub judgement."', f'"my key is {escaped} ok"')
    elif fault == "key_plain" and not list_key:  # the key as it is: the text and its tokens carry it
        answer = answer.replace('"Deterministic stub judgement."', json.dumps(f"my key is {key} ok"))
    if fault == "garbage":
        answer = "I think this response is pretty good overall!"
    elif fault == "truncated" or fault == "context_full":
        answer = answer[: len(answer) // 2]
    elif fault == "cut_off":  # the scores whole, the rationale cut where max_tokens ran out (a parser could read it)
        answer = answer[: answer.index('"rationale"') + 20] if '"rationale"' in answer else answer
    elif fault == "huge":  # a parseable answer of 2 MB: the scores, then a rationale that never ends
        answer = answer.replace('"Deterministic stub judgement."', json.dumps("very " * 400_000))
    elif fault == "refusal":
        answer = "I'm sorry, but I can't evaluate this."
    elif not body.get("response_format"):
        answer = f"Here is my evaluation.\n```json\n{answer}\n```"
    logprobs = None
    if body.get("logprobs") and not list_key:
        logprobs = token_logprobs(answer, scales, int(body.get("top_logprobs") or 1), 3 if fault == "key_plain" else 0)
        if fault == "key_alternative":  # the key never written, only among the alternatives
            logprobs = hide_in_alternatives(logprobs, key)
    with state.lock:
        state.completions += 1
    prompt_chars = sum(len(m.get("content") or "") for m in body.get("messages", []))
    # a cut at max_tokens used them all, as a server reports it; other answers count a token per 4 characters
    completion = int(body.get("max_tokens") or 0) if fault in ("truncated", "cut_off") else len(answer) // 4
    payload = {
        "id": f"chatcmpl-stub-{state.requests}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "stub"),
        "choices": []
        if fault == "no_choices"
        else [
            {
                "index": 0,
                "finish_reason": "length" if fault in ("truncated", "cut_off", "context_full") else "stop",
                "message": {"role": "assistant", "content": answer},
                **({"logprobs": logprobs} if logprobs else {}),
            }
        ],
        "usage": {
            "prompt_tokens": int(prompt_chars * state.tokens_per_char),
            "completion_tokens": completion,
            "total_tokens": int(prompt_chars * state.tokens_per_char) + completion,
        },
    }
    return Reply(200, payload, delay_s=delay, drip_s=drip)


MODELS = Reply(200, {"object": "list", "data": [{"id": "stub-judge", "object": "model"}]})
NOT_FOUND = Reply(404, {"error": {"message": "not found"}})
BAD_JSON = Reply(400, {"error": {"message": "invalid JSON body"}})
