"""One request against the local OpenAI-protocol server: what it is read as, and what it costs the run's budget
(a reservation replaced by the reported usage; kept whole when the request may have been billed; none when the
endpoint refused it)."""

from __future__ import annotations

import asyncio

import openai
import pytest

from eval_pipeline.devtools.openai_stub import StubServer
from eval_pipeline.judge import reply, transport
from eval_pipeline.judge.costs import Budget, Prices

PRICE = Prices("USD", {"m": (1_000_000.0, 1_000_000.0)})  # one unit a token: costs read as token counts
BODY = {"model": "m", "messages": [{"role": "user", "content": "Rate: 4"}], "max_tokens": 50}


def _send(stub: StubServer, budget: Budget | None, wait_s: float = 5.0) -> reply.Sent:
    async def go() -> reply.Sent:
        http = openai.AsyncOpenAI(api_key="sk-test", base_url=stub.base_url, max_retries=0)
        stop = asyncio.get_running_loop().create_future()
        try:
            return await transport.send(http, dict(BODY), lambda waited: wait_s, stop, budget, "sk-test")
        finally:
            await http.close()

    return asyncio.run(go())


@pytest.fixture
def stub():
    with StubServer() as s:
        yield s


def test_an_answer_costs_what_the_endpoint_reports(stub):
    budget = Budget(10_000.0, PRICE)
    sent = _send(stub, budget)
    assert sent.failure is None and sent.answered and sent.text
    assert sent.prompt_tokens > 0 and budget.spent == sent.prompt_tokens + sent.completion_tokens
    assert budget.held == 0


def test_a_request_that_timed_out_keeps_its_whole_reservation(stub):
    stub.state.faults.append("timeout")
    budget = Budget(10_000.0, PRICE)
    sent = _send(stub, budget, wait_s=0.3)
    assert sent.failure == reply.TIMEOUT and not sent.answered
    assert budget.spent > 50 and budget.held == 0  # the answer's whole room and the prompt, from above


def test_a_refused_request_costs_nothing(stub):
    stub.state.faults.append("500")
    budget = Budget(10_000.0, PRICE)
    sent = _send(stub, budget)
    assert (sent.failure, sent.status) == (reply.STATUS, 500)
    assert budget.spent == 0 and budget.held == 0


def test_a_request_the_budget_does_not_cover_is_not_sent(stub):
    budget = Budget(10.0, PRICE)  # less than the answer's room alone
    sent = _send(stub, budget)
    assert sent.failure == reply.NOT_SENT and "EVAL_JUDGE_BUDGET" in sent.message
    assert stub.state.requests == 0 and budget.spent == 0
