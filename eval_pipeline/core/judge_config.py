"""The judge's settings: one typed object (``JudgeConfig``), every knob a field whose metadata names the environment
variable that sets it for a run or the panel entry's field that sets it for one judge (#76); ``judge_config()``
reads them from the environment once. Re-exported by core.settings, where the other settings are."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

CALL_MODES = ("online", "batch")  # how an endpoint's judge is asked (JudgeConfig.call_mode)


def _knob(default: Any, env: str | None = None, panel: str | None = None) -> Any:
    """A field of ``JudgeConfig``: ``env``, the environment variable that sets it for the run (docs/operating.md's
    table has a row for it); ``panel``, the panel entry's field that overrides it for one judge (``JudgeSpec``)."""
    return field(default=default, metadata={"env": env, "panel": panel})


@dataclass(frozen=True)
class JudgeConfig:
    """The judge's settings, one typed object: which backend (``mode``) and, for each judge of a rubric's panel, the
    model, the endpoint, the sampling and how calls are made. Read from the environment once (``judge_config()``,
    each field's variable) or given by the Dagster resource (``defs.resources.JudgeResource``, made from these
    fields), overridden per panel entry (``for_judge``), then passed as it is to the backend, the cache key, the
    client and the worker processes. Validated when made: a wrong value is a ``ValueError`` naming the setting.
    Adding a knob is one field here and its row in docs/operating.md (tests/house/test_settings.py holds both).

    The API key is not here: the client reads OPENAI_API_KEY when it is made, so it never travels in an object
    that is logged, serialised or recorded."""

    mode: str = _knob("heuristic", "EVAL_JUDGE")  # a judge backend's name (judge.backends)
    model: str = _knob("gpt-4o-mini", "EVAL_JUDGE_MODEL", "model")
    base_url: str | None = _knob(None, "OPENAI_BASE_URL", "base_url")  # None: the client's default, api.openai.com
    concurrency: int = _knob(16, "EVAL_JUDGE_CONCURRENCY")  # calls in flight at once
    timeout_s: float = _knob(60.0, "EVAL_JUDGE_TIMEOUT")  # one call's time-out
    max_retries: int = _knob(4, "EVAL_JUDGE_MAX_RETRIES")
    processes: int = _knob(0, "EVAL_JUDGE_PROCESSES")  # worker processes for the calls (0: automatic)
    # attempts refused or timed out in a row (no answer of any kind between them) before the endpoint is given up:
    # every call not yet answered is given up at once with that reason (0: never). An endpoint that has answered in
    # this client is slow, not dead, until it has also answered nothing for ``max_silence_s``; until then an attempt
    # it left unanswered while answering nothing else costs its call none of ``max_retries``
    max_consecutive_failures: int = _knob(8, "EVAL_JUDGE_MAX_CONSECUTIVE_FAILURES")
    max_silence_s: float = _knob(600.0, "EVAL_JUDGE_MAX_SILENCE")
    backoff_base_s: float = _knob(0.5, "EVAL_JUDGE_BACKOFF_BASE")  # the first retry's back-off (doubling, jitter)
    backoff_max_s: float = _knob(20.0, "EVAL_JUDGE_BACKOFF_MAX")  # the longest back-off
    budget: float | None = _knob(None, "EVAL_JUDGE_BUDGET")  # what one run may spend on the judge (None: no limit)
    prices: str | None = _knob(None, "EVAL_PRICES")  # the price table (model -> price per 1M tokens)
    # how the judge is asked: "online" (a request per prompt) or "batch" (the provider's Batch API: judge.batch);
    # with the batches' window, how often open ones are asked about, and how the lines a batch did not answer are
    # asked again. None of these is in the cache key or the identity: batch and online answers are one judge's
    call_mode: str = _knob("online", "EVAL_JUDGE_MODE", "mode")
    batch_window: str = _knob("24h", "EVAL_JUDGE_BATCH_WINDOW")
    batch_poll_s: float = _knob(60.0, "EVAL_JUDGE_BATCH_POLL")
    batch_retry: str = _knob("batch", "EVAL_JUDGE_BATCH_RETRY")
    # one judge of the panel (its entry's fields; the defaults for a rubric without a panel)
    name: str = _knob("default", panel="name")
    identity: str | None = _knob(None, panel="identity")  # the panel's `identity:` for this judge; None: endpoint
    temperature: float = _knob(0.0, panel="temperature")
    seed: int | None = _knob(7, panel="seed")
    max_tokens: int = _knob(800, panel="max_tokens")
    top_logprobs: int = _knob(0, panel="top_logprobs")  # > 0: ask for the tokens' log probabilities
    extra_body: tuple[tuple[str, Any], ...] = _knob((), panel="extra_body")  # server-specific options, as they are
    # learnt, not set: the requests the server says it serves at once (judge.calls.call_specs sets it and caps
    # ``concurrency`` there): a call that outlasts its time-out is then being worked on, not queued
    server_slots: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", self.mode.strip().lower())
        object.__setattr__(self, "call_mode", self.call_mode.strip().lower())
        object.__setattr__(self, "batch_retry", self.batch_retry.strip().lower())
        for name, allowed in (("call_mode", CALL_MODES), ("batch_retry", CALL_MODES)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"judge setting {name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        if not self.batch_window.strip():
            raise ValueError("judge setting batch_window must not be empty (e.g. 24h)")
        if not isinstance(self.batch_poll_s, (int, float)) or not 0 < self.batch_poll_s < math.inf:
            raise ValueError(f"judge setting batch_poll_s must be a number > 0, got {self.batch_poll_s!r}")
        low = {"concurrency": 1, "max_retries": 0, "processes": 0, "max_consecutive_failures": 0, "max_silence_s": 0}
        low |= {"backoff_base_s": 0, "backoff_max_s": 0}
        for name, least in low.items():
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value or value < least:
                raise ValueError(f"judge setting {name} must be a number >= {least}, got {value!r}")
        if not isinstance(self.timeout_s, (int, float)) or not self.timeout_s > 0:
            raise ValueError(f"judge setting timeout_s must be > 0, got {self.timeout_s!r}")
        if not self.mode or not self.model.strip():
            raise ValueError("judge settings mode and model must not be empty")
        b = self.budget
        if b is not None and (not isinstance(b, (int, float)) or isinstance(b, bool) or not 0 <= b < math.inf):
            raise ValueError(f"judge setting budget must be a finite number >= 0, got {b!r}")

    @property
    def endpoint(self) -> str:
        """The endpoint that answers, as the cache key and the client's memory name it: ``base_url``, else the
        client's default."""
        return (self.base_url or "https://api.openai.com/v1").strip().rstrip("/").lower()

    def for_judge(self, spec: Any = None) -> JudgeConfig:
        """The settings of the judge ``spec`` names (a panel entry, ``core.config.JudgeSpec``; None: the one default
        judge): each field a knob names (``panel``) from the entry; a knob the run also sets (``env``: the model,
        the endpoint, the mode) stays the run's where the entry leaves it unset."""
        if spec is None:
            return self
        given: dict[str, Any] = {}
        for f in fields(self):
            name = f.metadata.get("panel")
            if not name:
                continue
            value = getattr(spec, name)
            if value is None and f.metadata.get("env"):
                continue
            given[f.name] = tuple(sorted(value.items())) if isinstance(value, dict) else value
        return replace(self, **given)

    def with_(self, **changes: object) -> JudgeConfig:
        """This configuration with ``changes`` (None values left out: unset, the configured value stays)."""
        given: dict[str, Any] = {k: v for k, v in changes.items() if v is not None}
        return replace(self, **given) if given else self  # each value checked by __post_init__


def judge_config() -> JudgeConfig:
    """The run's ``JudgeConfig`` from the environment: each field's variable (``_knob``'s ``env``) where it is set,
    the field's default where not; a value that is not of the field's kind is a ValueError naming the variable."""
    given: dict[str, Any] = {}
    for f in fields(JudgeConfig):
        env = f.metadata.get("env")
        raw = os.environ.get(env, "").strip() if env else ""
        if env and raw:
            given[f.name] = typed_value(env, raw, str(f.type))
    return JudgeConfig(**given)


def typed_value(env: str, raw: str, kind: str) -> Any:
    """``raw`` (a variable's text) as a field of kind ``kind`` (its annotation) is."""
    if kind.startswith("int"):
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"{env} {raw!r} is not a whole number") from None
    if kind.startswith("float"):
        try:
            return float(raw)
        except ValueError:
            raise ValueError(f"{env} {raw!r} is not a number") from None
    return raw
