"""What the provider says, read: a batch's standing as a submission's row (absorbed; missed when the provider does not
find it, lost after LOST_LOOKS looks), and a result or error file's line as the online client's result."""

from __future__ import annotations

import json
from typing import Any

from eval_pipeline.core.types import Row
from eval_pipeline.judge import costs, reply
from eval_pipeline.judge.batch.records import (
    LOST,
)
from eval_pipeline.judge.client import CallResult
from eval_pipeline.judge.redact import redact

LOST_LOOKS = 3  # a batch the provider does not find at this many looks in a row (each a run, a poll apart) is lost


def missed(sub: Row) -> Row:
    """The submission after a look at which the provider found its batch neither by id nor in its list: still
    waited on (one 404 is not a loss: a provider's records may lag), lost only at ``LOST_LOOKS`` in a row."""
    looks = int(sub.get("unseen") or 0) + 1
    reason = f"the provider did not find this batch ({looks} of {LOST_LOOKS} looks, by its id and in the batch list)"
    if looks < LOST_LOOKS:
        return {**sub, "unseen": looks, "reason": reason}
    return {**sub, "unseen": looks, "state": LOST, "reason": f"lost: {reason}"}


def absorbed(sub: Row, batch: Any) -> Row:
    """The submission as the provider's ``batch`` (an ``openai.types.Batch``) says it stands."""
    counts = batch.request_counts
    errors = getattr(batch, "errors", None)
    reason = sub.get("reason")
    if errors is not None and getattr(errors, "data", None):
        reason = "; ".join(f"{e.code}: {e.message}" for e in errors.data if e is not None)[:500]
    return {
        **sub,
        "batch_id": batch.id,
        "state": batch.status,
        "input_file_id": batch.input_file_id or sub.get("input_file_id"),
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "completed": int(counts.completed) if counts else 0,
        "failed": int(counts.failed) if counts else 0,
        "reason": reason,
    }


def json_object(raw: bytes | None) -> dict[str, Any]:
    try:
        item = json.loads(raw) if raw else None
    except ValueError:
        return {}
    return item if isinstance(item, dict) else {}


def result_of(item: dict[str, Any], secret: str | None) -> CallResult:
    """A result or error file's line as the online client's result: read by judge.reply (redacted, its usage and
    token log probabilities), or the line's failure."""
    got = item.get("response")
    response: dict[str, Any] = got if isinstance(got, dict) else {}
    body = response.get("body")
    status = response.get("status_code")
    error = item.get("error")
    if error or status != 200:
        detail = error if isinstance(error, dict) else (body or {}).get("error") if isinstance(body, dict) else None
        message = str((detail or {}).get("message") or (detail or {}).get("code") or "no answer")
        code = (detail or {}).get("code") or status  # the provider's words, all of them: the key may be in any
        return CallResult(error=redact(f"judge batch line failed ({code}): {message}", secret)[:300], attempts=1)
    sent = reply.read(body, costs.reported_usage(body), None, secret)
    if sent.failure is not None:
        return CallResult(error=f"judge batch line: {sent.failure}: {sent.message}", attempts=1)
    return CallResult(
        text=sent.text,
        error=sent.error,
        prompt_tokens=sent.prompt_tokens,
        completion_tokens=sent.completion_tokens,
        attempts=1,
        logprobs=sent.logprobs,
        truncated=sent.truncated,
    )
