"""One judge's settings, made once from the run's ``JudgeConfig`` (core.settings) and the panel entry that names the
judge: the object the backend, the cache key, the client and the worker processes all take.

The way a setting goes, one way: the Dagster resource (or the environment, read once) gives a ``JudgeConfig``; the
runner hands it to the backend; the backend makes each judge's ``JudgeSettings`` here (``settings_for``) and hands
them down: to the rows (judge.llm_rows), the cache key (judge.cache), the calls through the cache (judge.cached),
the batch (judge.calls), the worker processes (judge.workers), the client (judge.client), the run's budget
(judge.costs) and the request (judge.transport). Each reads the fields and passes the object on; none hands it
back up. The settings are data: nothing below calls into this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eval_pipeline.core.config import JudgeSpec
from eval_pipeline.core.settings import JudgeConfig


@dataclass(frozen=True)
class JudgeSettings:
    name: str
    model: str
    base_url: str | None = None
    temperature: float = 0.0
    seed: int | None = 7
    max_tokens: int = 800
    timeout_s: float = 60.0
    max_retries: int = 4
    concurrency: int = 16
    processes: int = 0  # worker processes for the calls; 0 = automatic (eval_pipeline.judge.calls.worker_processes)
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0
    identity: str | None = None  # the panel's `identity:` for this judge; None: its endpoint
    top_logprobs: int = 0  # > 0: ask for the tokens' log probabilities (logprobs, top_logprobs)
    # this many attempts in a row refused or timed out (no answer of any kind between them): the endpoint is down,
    # every call not yet answered is given up at once with that reason (0: never). An endpoint that has answered in
    # this client is slow, not dead, until it has also answered nothing for ``max_silence_s``; until then an
    # attempt it left unanswered while answering nothing else costs its call none of ``max_retries``
    max_consecutive_failures: int = 8
    max_silence_s: float = 600.0
    extra_body: tuple[tuple[str, Any], ...] = ()  # server-specific options sent as they are (JudgeSpec.extra_body)
    # the requests the server says it serves at once (judge.calls.call_specs sets it and caps ``concurrency`` there):
    # a call that outlasts its time-out is then being worked on, not queued, and waits longer instead of being cut
    server_slots: int | None = None
    prices: str | None = None  # the price table the judge's calls are costed with (JudgeConfig.prices)
    # how the judge is asked (JudgeConfig.call_mode, a panel entry's ``mode`` over it): "online" or "batch"
    # (judge.batch); with the batch window and how the lines a batch did not answer are asked again. None of these
    # is in the cache key or the identity: batch and online answers of one judge are the same judge's
    call_mode: str = "online"
    batch_window: str = "24h"
    batch_retry: str = "batch"

    # the endpoint that answers, as the cache key and the client's memory name it: ``base_url`` (the panel entry's,
    # else the configuration's), else the client's default; worked out when the settings are made
    endpoint: str = field(init=False)

    def __post_init__(self) -> None:
        url = self.base_url or "https://api.openai.com/v1"
        object.__setattr__(self, "endpoint", url.strip().rstrip("/").lower())


def settings_for(config: JudgeConfig, spec: JudgeSpec | None = None) -> JudgeSettings:
    """The settings of the judge ``spec`` (a panel entry; None: the one default judge) under ``config``: the entry's
    model, endpoint and sampling over the configuration's, the configuration's call policy."""
    spec = spec or JudgeSpec(name="default")
    return JudgeSettings(
        name=spec.name,
        model=spec.model or config.model,
        base_url=spec.base_url or config.base_url,
        identity=spec.identity,
        temperature=spec.temperature,
        seed=spec.seed,
        max_tokens=spec.max_tokens,
        top_logprobs=spec.top_logprobs,
        extra_body=tuple(sorted(spec.extra_body.items())),
        timeout_s=config.timeout_s,
        max_retries=config.max_retries,
        concurrency=config.concurrency,
        processes=config.processes,
        max_consecutive_failures=config.max_consecutive_failures,
        max_silence_s=config.max_silence_s,
        backoff_base_s=config.backoff_base_s,
        backoff_max_s=config.backoff_max_s,
        prices=config.prices,
        call_mode=spec.mode or config.call_mode,
        batch_window=config.batch_window,
        batch_retry=config.batch_retry,
    )
