"""One judge's settings, made once from the run's ``JudgeConfig`` (core.settings) and the panel entry that names the
judge: the object the backend, the cache key, the client and the worker processes all take.

The way a setting goes: the Dagster resource (or the environment, read once) gives a ``JudgeConfig``; the runner
hands it to the backend; the backend makes each judge's ``JudgeSettings`` here (``settings_for``); the calls, the
cache and the client read that object and nothing else.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from eval_pipeline.core.config import JudgeSpec
from eval_pipeline.core.settings import JudgeConfig
from eval_pipeline.core.types import JSONObject


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

    def endpoint(self) -> str:
        """The endpoint that answers: ``base_url`` (the panel entry's, else the configuration's), else the client's
        default."""
        url = self.base_url or "https://api.openai.com/v1"
        return url.strip().rstrip("/").lower()

    def cache_params(self) -> JSONObject:
        """What the cache key includes besides the prompt: who answers (the endpoint, or the identity the
        configuration gives it when several endpoints serve the same judge), model and sampling parameters."""
        params = {
            "endpoint": self.identity or self.endpoint(),
            "model": self.model,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
        }
        if self.top_logprobs:  # only when asked, so the keys of every answer cached before stay the same
            params["top_logprobs"] = self.top_logprobs
        if self.extra_body:  # they change answers: part of the key (absent, every earlier key stays the same)
            params["extra_body"] = dict(self.extra_body)
        return params

    def to_json(self) -> str:
        """These settings as one JSON document (the worker processes' protocol); ``from_json`` reads it back."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JudgeSettings:
        values = json.loads(text)
        values["extra_body"] = tuple((k, v) for k, v in values.get("extra_body", ()))
        return cls(**values)


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
    )
