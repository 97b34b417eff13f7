"""One request to the endpoint: the run's budget drawn on (judge.costs), the POST of a chat completion, bounded in time
and dropped at once when the endpoint is given up on, and what came back read (judge.reply).

The POST is the `openai` client's documented low-level one: the same transport, auth and typed errors as
``chat.completions.create``, but the messages are not re-walked through its TypedDict transform and the answer is
read as plain JSON instead of building pydantic models (a third less CPU per call: bench/bench_judge_throughput.py).
The wait is bounded here, as a whole: the client's own time-out bounds each read, so a server sending a byte now and
then would otherwise hold a call forever.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eval_pipeline.core.types import JSONObject
from eval_pipeline.judge import costs, reply

if TYPE_CHECKING:
    import openai


def _quiet(future: asyncio.Future[Any]) -> None:
    """Retrieve a cancelled POST's outcome, so asyncio does not report it as never retrieved."""
    if not future.cancelled():
        future.exception()


# long by design: reserve, wait, settle and read in one place, so no request escapes its reservation
async def send(
    http: openai.AsyncOpenAI,
    body: JSONObject,
    allowed: Callable[[float], float],
    stop: asyncio.Future[None],
    budget: costs.Budget | None,
    secret: str | None,
) -> reply.Sent:
    """One request for ``body``, read (judge.reply): the answer, or the failure by kind.

    Under a ``budget`` the request's cost is reserved from above first (not covered: not sent) and, when it is
    over, replaced by what the endpoint reports it used; without a report, the whole reservation stays when the
    request may have been billed (it timed out, or an answer came without its usage), none otherwise.
    ``allowed(waited)`` is how long in all the request may wait, having waited ``waited`` s: asked at the start and
    each time that runs out, so a caller may let a request the server is working on wait longer. When ``stop`` is
    done the request is dropped at once (the calls in flight to a black hole do not each wait out their
    time-out)."""
    import openai

    held = None
    if budget is not None:
        held = budget.reserve(body["model"], body["messages"], body.get("response_format"), body["max_tokens"])
        if held is None:
            return reply.Sent(failure=reply.NOT_SENT, message=budget.why_not())
    data: Any = None
    error: BaseException | None = None
    usage: tuple[int, int] | None = None
    try:
        posted: asyncio.Future[Any] = asyncio.ensure_future(http.post("/chat/completions", body=body, cast_to=object))
        waiting: set[asyncio.Future[Any]] = {posted, stop}
        done: set[asyncio.Future[Any]] = set()
        t0 = time.perf_counter()
        try:
            while not done:
                waited = time.perf_counter() - t0
                limit = allowed(waited)
                if waited >= limit:
                    break
                done, _ = await asyncio.wait(waiting, timeout=limit - waited, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not posted.done():
                posted.cancel()
                posted.add_done_callback(_quiet)
        if posted in done:
            data = posted.result()
        elif stop in done:
            error = reply.GivenUp()
        else:
            raise asyncio.TimeoutError
    except Exception as exc:  # the endpoint's failure, read by kind below (anything else is raised again there)
        error = exc
    finally:
        usage = costs.reported_usage(data)
        if held is not None and budget is not None:
            timed_out = isinstance(error, (openai.APITimeoutError, asyncio.TimeoutError))
            billed = timed_out or (isinstance(data, dict) and usage is None)
            budget.settle(held, body["model"], usage, billed)
    return reply.read(data, usage, error, secret)
