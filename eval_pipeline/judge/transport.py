"""One request to the endpoint: the POST of a chat completion, bounded in time, dropped at once when the endpoint is
given up on.

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

if TYPE_CHECKING:
    import openai

GIVEN_UP = object()  # what a POST returns when the endpoint was given up on while it was in flight


def _quiet(future: asyncio.Future[Any]) -> None:
    """Retrieve a cancelled POST's outcome, so asyncio does not report it as never retrieved."""
    if not future.cancelled():
        future.exception()


async def post(
    http: openai.AsyncOpenAI, body: JSONObject, allowed: Callable[[float], float], stop: asyncio.Future[None]
) -> Any:
    """The endpoint's answer to ``body`` (parsed JSON, as the server sent it), or ``GIVEN_UP`` as soon as ``stop``
    is done (the calls in flight to a black hole do not each wait out their time-out), or ``asyncio.TimeoutError``.

    ``allowed(waited)`` is how long in all the call may wait, having waited ``waited`` s; it is asked at the start
    and each time that runs out, so a caller may let a call that the server is working on wait longer."""
    sent: asyncio.Future[Any] = asyncio.ensure_future(http.post("/chat/completions", body=body, cast_to=object))
    waiting: set[asyncio.Future[Any]] = {sent, stop}
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
        if not sent.done():
            sent.cancel()
            sent.add_done_callback(_quiet)
    if sent in done:
        return sent.result()
    if stop in done:
        return GIVEN_UP
    raise asyncio.TimeoutError
