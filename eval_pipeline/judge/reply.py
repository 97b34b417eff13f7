"""What the endpoint sent back for one request, read as the client needs it: an answer (its text, whether it was
cut off, its token log probabilities, the tokens it used) or a failure of a named kind the client decides on
(retry, give up, ask without the schema). Everything an endpoint sends back is stored, logged or shown somewhere,
so the text, the refusal and every error message are read with the key removed (judge.redact)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eval_pipeline.judge.redact import redact, redact_tokens

if TYPE_CHECKING:
    import openai

# the kinds of failure (``Sent.failure``); None: an answer
NOT_SENT = "not sent"  # the run's budget would not cover the request
GIVEN_UP = "given up"  # the endpoint was given up on while the request was in flight
TIMEOUT = "timeout"
RATE_LIMITED = "rate limited"
CONNECTION = "connection"
BAD_REQUEST = "bad request"
REFUSED = "refused"  # authentication, permission, not found: asking again cannot help
STATUS = "status"  # another HTTP status
MALFORMED = "malformed"
NOT_JSON = "not json"  # a body that is not a JSON object (a proxy's HTML page)


class GivenUp(Exception):
    """The request was dropped in flight: the endpoint was given up on (the client's circuit breaker)."""


@dataclass
class Sent:
    """One request's outcome. ``answered``: a body came back (the endpoint is alive, whatever it said)."""

    failure: str | None = None
    message: str = ""  # the failure's or the unusable answer's reason, redacted
    status: int | None = None
    retry_after: float | None = None  # seconds, as a 429 asked
    schema_unsupported: bool = False  # a 400 that refuses the response_format
    answered: bool = False
    text: str | None = None
    error: str | None = None  # an answer that cannot be used as it is (no choices, a refusal, too long)
    truncated: bool = False
    logprobs: list[Any] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


def read(data: Any, usage: tuple[int, int] | None, error: BaseException | None, secret: str | None) -> Sent:
    """The outcome of a request whose body was ``data`` (the parsed JSON; None when ``error`` was raised instead:
    ``GivenUp`` when it was dropped in flight), with ``usage`` (prompt, completion tokens) as the endpoint reported
    it. An error that is not the endpoint's (a bug) is raised again."""
    if error is not None:
        return _failure(error, secret)
    if not isinstance(data, dict):  # a 200 that is not JSON (a proxy's page): asked again
        return Sent(failure=NOT_JSON, message=redact(str(data), secret)[:120], answered=True)
    sent = Sent(answered=True)
    sent.prompt_tokens, sent.completion_tokens = usage or (0, 0)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        sent.error = "answer has no choices"
        return sent
    msg = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(msg, dict):
        sent.error = "answer has no message"
        return sent
    # cut off where max_tokens ran out: kept (it is the judge's answer) but never read as a score
    sent.truncated = choices[0].get("finish_reason") == "length"
    content = msg.get("content")
    if isinstance(content, str) and len(content) > MAX_ANSWER_CHARS:
        # not a rubric's answer (a schema bounds its rationale): never a score, never cached whole
        sent.error = f"answer of {len(content):,} characters, more than {MAX_ANSWER_CHARS:,} (not stored)"
        return sent
    sent.text = redact(content, secret) if isinstance(content, str) else None
    sent.logprobs = redact_tokens(_token_logprobs(choices[0].get("logprobs")), secret)
    if sent.text is None and msg.get("refusal"):
        sent.error = f"refusal: {redact(str(msg['refusal']), secret)[:200]}"
    return sent


def _connection_reason(exc: BaseException, secret: str | None) -> str:
    """What went wrong under the client's "Connection error.": the cause it wraps (refused, unknown host, an
    answer past the bound), and where the endpoint comes from when nothing answered at all."""
    from eval_pipeline.judge.bounded_http import TooLarge

    causes: list[str] = []
    seen: BaseException | None = exc.__cause__ or exc.__context__
    while seen is not None and len(causes) < 3:
        text = " ".join(str(seen).split())
        if text and text not in causes:
            causes.append(text)
        if isinstance(seen, TooLarge):
            return redact(text, secret)[:300]
        seen = seen.__cause__ or seen.__context__
    cause = redact("; ".join(causes), secret)[:240] or redact(str(exc), secret)[:120]
    return f"{cause} (is the endpoint right? OPENAI_BASE_URL, or the panel's base_url)"


def _failure(exc: BaseException, secret: str | None) -> Sent:
    """A request that raised ``exc``, by kind; anything that is not the endpoint's failure is raised again."""
    import openai

    if isinstance(exc, GivenUp):
        return Sent(failure=GIVEN_UP)
    text = redact(str(exc), secret)
    if isinstance(exc, openai.BadRequestError):
        return Sent(failure=BAD_REQUEST, message=text[:300], status=400, schema_unsupported=_schema_unsupported(exc))
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError)):
        return Sent(failure=REFUSED, message=f"{type(exc).__name__} ({exc.status_code}): {text[:300]}")
    if isinstance(exc, openai.RateLimitError):
        return Sent(failure=RATE_LIMITED, retry_after=_retry_after_seconds(exc))
    if isinstance(exc, (openai.APITimeoutError, asyncio.TimeoutError)):
        return Sent(failure=TIMEOUT)
    if isinstance(exc, openai.APIConnectionError):
        return Sent(failure=CONNECTION, message=_connection_reason(exc, secret))
    if isinstance(exc, openai.APIStatusError):
        return Sent(failure=STATUS, message=text[:300], status=exc.status_code)
    if isinstance(exc, openai.APIResponseValidationError):
        return Sent(failure=MALFORMED, message=text[:200])
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):  # a 200 whose body is not JSON
        return Sent(failure=NOT_JSON, message=text[:120])
    raise exc


# The longest answer text read: a rubric's answer is scores and a rationale the schema bounds (600 characters);
# a larger one is a missing score with its reason, so neither judge_scores nor the cache holds megabytes.
MAX_ANSWER_CHARS = 64 * 1024


def _token_logprobs(block: Any) -> list[Any] | None:
    """The answer's tokens with their top alternatives, compact: [[token, [[alt, logprob], ...]], ...]."""
    content = block.get("content") if isinstance(block, dict) else None
    if not isinstance(content, list):
        return None
    out = []
    for t in content:
        if not isinstance(t, dict) or not isinstance(t.get("token"), str):
            return None
        alts = [
            [a["token"], float(a["logprob"])]
            for a in (t.get("top_logprobs") or [])
            if isinstance(a, dict) and isinstance(a.get("token"), str) and isinstance(a.get("logprob"), int | float)
        ]
        if not alts and isinstance(t.get("logprob"), int | float):
            alts = [[t["token"], float(t["logprob"])]]
        out.append([t["token"], alts])
    return out


def _retry_after_seconds(exc: openai.APIStatusError) -> float | None:
    headers = getattr(exc.response, "headers", None) or {}
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000
            if math.isfinite(value):
                return max(0.0, value)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        seconds = float(ra)
    except ValueError:  # an HTTP date, or something else a proxy made up ("soon", "30s"): then our own backoff
        try:
            parsed = email.utils.parsedate_to_datetime(ra)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if parsed.tzinfo is None:
            return None
        seconds = parsed.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _schema_unsupported(exc: openai.BadRequestError) -> bool:
    msg = str(exc).lower()
    return any(w in msg for w in ("response_format", "json_schema", "structured output", "schema"))
