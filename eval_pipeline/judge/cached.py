"""Judge calls through the cache: a prompt answered before is not asked again, every answer is cached as it
arrives (usable or not), and a listening console sees progress. Shared by the judge panel and the extraction."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from eval_pipeline.core import progress
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.judge import cache, costs
from eval_pipeline.judge.batch import answer as answer_by_batch
from eval_pipeline.judge.calls import call_specs
from eval_pipeline.judge.client import CallOutcome, CallSpec, ClientStats
from eval_pipeline.judge.parsing import JudgeParseError
from eval_pipeline.storage.warehouse import Warehouse


@dataclass
class JudgeRunStats:
    judges: list[str] = field(default_factory=list)
    judge_kind: str = "heuristic"
    prompts: int = 0
    calls: int = 0
    http_attempts: int = 0
    cache_hits: int = 0
    missing: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    max_in_flight: int = 0
    processes: int = 1
    missing_reasons: dict[str, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)  # one per call made (cache hits took none)
    models: list[str] = field(default_factory=list)
    spent: float = 0.0  # in the price table's currency, for the calls made (cache hits cost nothing)
    priced: bool = True  # False once a call was made to a model the price table has no price for
    not_asked_budget: int = 0  # prompts left unasked because the run's budget would not cover them
    # the client throttling itself: calls in flight at the start (an earlier step's learning, else the configured),
    # halvings on time-outs, and where it settled (0: never changed)
    start_concurrency: int = 0
    timeout_cuts: int = 0
    final_concurrency: int = 0
    timeout_extensions: int = 0  # time-outs doubled for calls in flight within the server's slots (none cut)
    mode: str = "online"  # how the calls were made: online, batch (judge.batch)
    pending: int = 0  # prompts waiting on a judge batch (no answer yet)
    online_spent: float = 0.0  # what the calls made would have cost online (the same as spent, online)

    def merge(self, other: JudgeRunStats) -> None:
        """Add another batch's figures (the same judges, scored in chunks)."""
        self.judges, self.judge_kind = other.judges or self.judges, other.judge_kind
        self.add_calls(other)
        self.prompts += other.prompts
        self.cache_hits += other.cache_hits
        self.missing += other.missing
        self.wall_s += other.wall_s
        self.models += [m for m in other.models if m not in self.models]
        self.not_asked_budget += other.not_asked_budget
        self.pending += other.pending
        self.mode = other.mode if other.mode == "batch" else self.mode
        self.online_spent += other.online_spent
        self.spent += other.spent
        self.priced &= other.priced
        for reason, n in other.missing_reasons.items():
            self.missing_reasons[reason] = self.missing_reasons.get(reason, 0) + n

    def add_calls(self, other: JudgeRunStats | ClientStats) -> None:
        """Add the calls another batch (or a client) made: counts and latencies add up; of the calls in flight and
        the processes, the larger; the throttling started where the first one did and settled where the last did."""
        self.calls += other.calls
        self.http_attempts += other.http_attempts
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.latencies_ms += other.latencies_ms
        self.max_in_flight = max(self.max_in_flight, other.max_in_flight)
        self.processes = max(self.processes, other.processes)
        self.start_concurrency = self.start_concurrency or other.start_concurrency
        self.timeout_cuts += other.timeout_cuts
        self.timeout_extensions += other.timeout_extensions
        self.final_concurrency = other.final_concurrency or self.final_concurrency

    @property
    def cost(self) -> float | None:
        """What the calls cost, or None when a model called has no price (EVAL_PRICES)."""
        return self.spent if self.priced else None

    @property
    def cache_hit_rate(self) -> float:
        return self.cache_hits / self.prompts if self.prompts else 0.0


def cached_calls(
    rubric: RubricConfig, settings: JudgeConfig, specs: list[CallSpec], wh: Warehouse, stats: JudgeRunStats
) -> dict[str, CallOutcome]:
    """Answer specs from the cache where possible, call the endpoint for the rest (identical prompts share
    one call), and cache every usable answer. No connection is held while calls are in flight."""
    stats.prompts += len(specs)
    hits = cache.lookup(wh, [s.key for s in specs])
    out: dict[str, CallOutcome] = {}
    todo: dict[str, CallSpec] = {}
    for spec in specs:
        if spec.key in out or spec.key in todo:
            continue
        c = hits.get(spec.key)
        if c is not None and c.get("usable") is False:  # the judge's final answer was unusable: the same missing
            out[spec.key] = CallOutcome(error=str(c.get("reason") or "unusable cached answer"), cached=True)
            continue
        if c is not None:
            try:
                out[spec.key] = CallOutcome(
                    parsed=spec.parse(c["answer_text"]),
                    answer_text=c["answer_text"],
                    logprobs=json.loads(c["logprobs"]) if isinstance(c.get("logprobs"), str) else None,
                    cached=True,
                    prompt_tokens=int(c["prompt_tokens"] or 0),
                    completion_tokens=int(c["completion_tokens"] or 0),
                )
                continue
            except JudgeParseError:
                pass  # a cached answer that no longer parses is asked again
        todo[spec.key] = spec
    stats.cache_hits += sum(1 for s in specs if s.key in out)
    if settings.model not in stats.models:
        stats.models.append(settings.model)
    tick = _progress(rubric, settings, len(out) + len(todo), len(out), sum(o.parsed is None for o in out.values()))
    prices = costs.load_prices(settings.prices)  # a table that cannot be read fails the step before a call is paid
    batch = settings.call_mode == "batch"
    stats.mode = "batch" if batch else stats.mode
    if todo:
        with cache.BackgroundWriter(wh) as writer:

            def on_answer(key: str, o: CallOutcome) -> None:
                stats.not_asked_budget += o.not_asked
                tick(o, called=not o.not_asked)
                if o.answer_text is None:
                    return  # no answer (the endpoint failed): nothing to keep, a re-run asks again
                # the answer that was used, usable or not, cached as it arrives: a re-run makes no call and
                # gets the same score or the same missing; a run killed mid-way keeps what it paid for
                writer.add(
                    dict(
                        cache_key=key,
                        judge=settings.name,
                        model=settings.model,
                        rubric=rubric.name,
                        rubric_version=rubric.version,
                        answer_text=o.answer_text,
                        prompt_tokens=o.prompt_tokens,
                        completion_tokens=o.completion_tokens,
                        latency_ms=o.latency_ms,
                        usable=o.parsed is not None,
                        reason=o.error if o.parsed is None else None,
                        logprobs=json.dumps(o.logprobs) if o.logprobs else None,
                    )
                )

            if batch:  # the provider's Batch API: answers of ended batches read, the rest submitted or pending
                fresh, cs = answer_by_batch(rubric, settings, list(todo.values()), wh, on_answer, writer.flush)
                stats.pending += sum(o.pending for o in fresh.values())
            else:
                fresh, cs = call_specs(settings, list(todo.values()), on_answer)
        stats.add_calls(cs)
        online_in, online_out = (
            cs.prompt_tokens - cs.batch_prompt_tokens,
            cs.completion_tokens - cs.batch_completion_tokens,
        )
        at_batch = prices.cost(settings.model, cs.batch_prompt_tokens, cs.batch_completion_tokens, batch=True)
        spent_online = prices.cost(settings.model, online_in, online_out)
        online = prices.cost(settings.model, cs.prompt_tokens, cs.completion_tokens)
        if cs.calls:
            stats.spent += (spent_online or 0.0) + (at_batch or 0.0)
            stats.online_spent += online or 0.0
            stats.priced &= online is not None
        out.update(fresh)
    return out


def _progress(rubric: RubricConfig, settings: JudgeConfig, total: int, hits: int, missing: int) -> Callable[..., None]:
    """Judge progress events for a listening console: done / total, cache hits, missing so far; one now, then
    one per answer (the returned ``tick``)."""
    t0 = time.perf_counter()
    state = {"done": hits, "missing": missing, "calls": 0}

    def emit() -> None:
        progress.emit(
            "judge",
            rubric=rubric.name,
            judge=settings.name,
            total=total,
            hits=hits,
            seconds=time.perf_counter() - t0,
            **state,
        )

    def tick(o: CallOutcome, called: bool = True) -> None:
        state["done"] += 1
        state["calls"] += called
        state["missing"] += o.parsed is None
        emit()

    emit()
    return tick
