"""#45: what a client learns about an endpoint lasts the process: the next step, rubric or checkpoint starts where
the last client of the same endpoint and model settled, not at the configured values a slow server had refused."""

from __future__ import annotations

import asyncio

from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.judge.client import OpenAIJudgeClient, forget_learnt, learnt


def _clients(*settings: JudgeConfig) -> list[OpenAIJudgeClient]:
    async def make() -> list[OpenAIJudgeClient]:
        return [OpenAIJudgeClient(s, api_key="sk-test") for s in settings]

    return asyncio.run(make())


def test_the_next_client_of_an_endpoint_starts_where_the_last_one_settled():
    forget_learnt()
    slow = JudgeConfig(name="j", model="smollm", base_url="http://127.0.0.1:9/v1", concurrency=16, timeout_s=60)
    (first,) = _clients(slow)
    assert (first._limit, first._timeout) == (16, 60)
    first._timed_out(0)  # two waves of cut calls: 16 -> 8 -> 4 in flight, 60 -> 120 -> 240 s
    first._timed_out(1)
    assert learnt(slow.endpoint, "smollm").limit == 4
    second, other_model, elsewhere = _clients(
        slow,
        JudgeConfig(name="j", model="other", base_url="http://127.0.0.1:9/v1", concurrency=16, timeout_s=60),
        JudgeConfig(name="j", model="smollm", base_url="http://127.0.0.1:10/v1", concurrency=16, timeout_s=60),
    )
    assert (second._limit, second._timeout) == (4, 240)  # the repeats step does not lose a wave again
    assert second.stats.start_concurrency == 4
    assert other_model._limit == 16 and elsewhere._limit == 16  # learnt per endpoint and model
    for _ in range(4):  # answers let it grow again, and that is remembered too
        second._answered()
    assert learnt(slow.endpoint, "smollm").limit == 5
    lower = JudgeConfig(name="j", model="smollm", base_url="http://127.0.0.1:9/v1", concurrency=2, timeout_s=60)
    (capped,) = _clients(lower)
    assert capped._limit == 2  # never past the configured concurrency
    forget_learnt()
