"""What judging costs: tokens, calls, cache hits and latency per judge step (``<rubric>.judge_usage``), money from
an optional price table, and a budget a run stops before exceeding.

Prices: ``EVAL_PRICES`` names a YAML file ::

    currency: USD
    models:                      # per 1M tokens
      gpt-4o-mini: {input: 0.15, output: 0.60}
      smollm2-135m: {input: 0, output: 0}

A model missing from it has no cost (null), never a guessed one. Batch API requests (EVAL_JUDGE_MODE=batch) cost
a model's own ``batch: {input, output}`` where given, else its online price times the table's ``batch_discount``
(e.g. ``batch_discount: 0.5``), else the online price.

Budget: ``EVAL_JUDGE_BUDGET`` (in the table's currency) for one run, or for one command's runs together (a
`run --wait` that evaluates a checkpoint again as its batches end: one budget, core.contracts.BUDGET_TAG).
Before each request it sends (a first ask, a retry, a re-ask with more room) the client reserves that request's
cost from above: one token per byte of the messages and the schema (no tokenizer makes more tokens than bytes)
plus the request's ``max_tokens``; a request the budget left (spent + reserved) does not cover is not sent, and
its prompt is a missing score with the reason ``budget``. When the answer arrives its reservation is replaced by
what the endpoint reports it used; a request that timed out keeps its whole reservation (it may have been
billed), one the endpoint refused keeps none. So a run never spends more than its budget, whatever is retried or
asked again, however dense the tokenizer. A Batch API line's reservation is held whole until the command ends
(what its results cost is not known before). The budget is the run's (the command's) in one process (the CLI,
the demo); under the UI's multiprocess executor, or on workers, each step also counts what the earlier steps of
its run (its command's runs) recorded in ``judge_usage``. With a budget but no price for the judge's model, the
step fails with one line: a budget that cannot be counted is not a budget.
"""

from __future__ import annotations

import functools
import json
import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any

from eval_pipeline.core.types import JSONObject

MESSAGE_OVERHEAD_TOKENS = 8


class BudgetError(ValueError):
    """A budget that cannot be counted (no price for the judge's model), or a price table that cannot be read."""


@dataclass(frozen=True)
class Prices:
    currency: str = "USD"
    per_mtok: dict[str, tuple[float, float]] = field(default_factory=dict)  # model -> (input, output)
    batch_per_mtok: dict[str, tuple[float, float]] = field(default_factory=dict)  # a model's own batch prices
    batch_discount: float | None = None  # else: the online price times this for batch requests (None: no discount)

    def price(self, model: str, batch: bool = False) -> tuple[float, float] | None:
        """(input, output) per 1M tokens of ``model``, online or through the Batch API; None: no price."""
        if batch and model in self.batch_per_mtok:
            return self.batch_per_mtok[model]
        price = self.per_mtok.get(model)
        if price is None or not batch or self.batch_discount is None:
            return price
        return price[0] * self.batch_discount, price[1] * self.batch_discount

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int, batch: bool = False) -> float | None:
        price = self.price(model, batch)
        if price is None:
            return None
        return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def load_prices(path: str | Path | None) -> Prices:
    """The price table at ``path`` (the judge configuration's ``prices``: EVAL_PRICES or the resource's); none
    configured: an empty table. Read once per version of the file (every judging batch asks)."""
    if not path:
        return Prices()
    try:
        stat = Path(path).stat()
    except OSError as exc:
        raise BudgetError(f"price table {path}: cannot be read ({exc})") from None
    if not S_ISREG(stat.st_mode):  # a FIFO or a device would be read forever
        raise BudgetError(f"price table {path}: not a regular file")
    version = stat.st_mtime_ns
    return _read_prices(str(path), version)


@functools.lru_cache(maxsize=8)
def _read_prices(where: str, version: int) -> Prices:
    import yaml

    try:
        data = yaml.safe_load(Path(where).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise BudgetError(f"price table {where}: cannot be read ({exc})") from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise BudgetError(f"price table {where}: expected 'models:' mapping a model to {{input, output}}")
    table, batch = {}, {}
    for model, p in models.items():
        table[str(model)] = _pair(where, repr(model), p)
        if isinstance(p, dict) and p.get("batch") is not None:
            batch[str(model)] = _pair(where, f"{model!r} batch", p["batch"])
    discount = data.get("batch_discount")
    if discount is not None:
        try:
            discount = float(discount)
        except (TypeError, ValueError):
            discount = -1.0
        if not 0 <= discount <= 1:
            raise BudgetError(f"price table {where}: batch_discount must be a number from 0 to 1 (0.5: half price)")
    return Prices(str(data.get("currency") or "USD"), table, batch, discount)


def _pair(where: str, what: str, p: Any) -> tuple[float, float]:
    """(input, output) of one entry of the table, per 1M tokens; a BudgetError naming ``what`` otherwise."""
    try:
        pin, pout = float(p["input"]), float(p["output"])
    except (TypeError, KeyError, ValueError):
        raise BudgetError(f"price table {where}: {what} needs numbers 'input' and 'output' (per 1M tokens)") from None
    if not (math.isfinite(pin) and math.isfinite(pout)) or pin < 0 or pout < 0:
        raise BudgetError(f"price table {where}: {what} prices must be finite and >= 0")
    return pin, pout


MAX_TOKENS_A_CALL = 10**8  # no request's prompt or answer is this long: a larger count is not a count


def token_count(value: Any) -> int:
    """A token count as the endpoint reports it; anything that is not a plausible count (text, NaN, 1e400, 10**14,
    negative) counts as 0."""
    try:
        n = int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0
    return n if 0 <= n < MAX_TOKENS_A_CALL else 0


def reported_usage(data: Any) -> tuple[int, int] | None:
    """The (prompt, completion) tokens an answer's body reports it used; None when it reports none."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict) or not usage:
        return None
    return token_count(usage.get("prompt_tokens")), token_count(usage.get("completion_tokens"))


def prompt_bound(messages: Sequence[JSONObject], schema: JSONObject | None) -> int:
    """A request's prompt tokens from above, whatever the tokenizer: one per byte of the messages and the schema
    (byte-level tokenizers make at most one token a byte), and a chat template's few per message."""
    size = sum(len(str(m.get("content") or "").encode()) for m in messages)
    if schema is not None:
        size += len(json.dumps(schema).encode())
    return size + MESSAGE_OVERHEAD_TOKENS * (len(messages) + 1)


NOT_COVERED = "budget: not asked: the run's EVAL_JUDGE_BUDGET ({limit:g} {currency}) would not cover it"


class Budget:
    """What one run may still spend; shared by its judge steps in this process."""

    def __init__(self, limit: float, prices: Prices, spent_before: float = 0.0):
        self.limit, self.prices, self.spent = limit, prices, spent_before
        self.held = 0.0  # reserved by requests in flight
        self._lock = threading.Lock()

    def price(self, model: str, batch: bool = False) -> tuple[float, float]:
        price = self.prices.price(model, batch)
        if price is None:
            raise BudgetError(
                f"EVAL_JUDGE_BUDGET is set but the price table has no price for model {model!r} (EVAL_PRICES)"
            )
        return price

    def reserve(
        self,
        model: str,
        messages: Sequence[JSONObject],
        schema: JSONObject | None,
        max_tokens: int,
        batch: bool = False,
    ) -> float | None:
        """Hold one request's cost from above (at its ``batch`` price for a Batch API line); None (nothing held)
        when what is left does not cover it."""
        pin, pout = self.price(model, batch)
        cost = (prompt_bound(messages, schema) * pin + max(max_tokens, 0) * pout) / 1e6
        with self._lock:
            if self.spent + self.held + cost > self.limit:
                return None
            self.held += cost
        return cost

    def settle(self, held: float, model: str, usage: tuple[int, int] | None, billed: bool) -> None:
        """Replace a reservation by what the request cost: its reported ``usage`` (prompt, completion tokens), or,
        without one, the whole reservation when it may have been ``billed`` (a time-out) and nothing otherwise."""
        if usage is not None:
            pin, pout = self.price(model)
            cost = (usage[0] * pin + usage[1] * pout) / 1e6
        else:
            cost = held if billed else 0.0
        with self._lock:
            self.held -= held
            self.spent += cost

    def why_not(self) -> str:
        return NOT_COVERED.format(limit=self.limit, currency=self.prices.currency)


_RUN_BUDGETS: dict[str, Budget] = {}
_CURRENT = threading.local()


def current() -> Budget | None:
    """The budget of the run whose judge step is executing in this thread (``spending``), if any."""
    return getattr(_CURRENT, "budget", None)


@contextmanager
def spending(
    run_id: str, limit: float | None, prices: str | None, spent_before: float = 0.0
) -> Iterator[Budget | None]:
    """Within: the judge calls of this thread draw on the run's budget of ``limit`` (the judge configuration's
    ``budget``: EVAL_JUDGE_BUDGET or the resource's) priced by the table at ``prices``, if a limit is set. The run's
    first step sets its budget; its later steps (in this process) draw on the same one."""
    if limit is None:
        yield None
        return
    budget = _RUN_BUDGETS.get(run_id)
    if budget is None:
        budget = _RUN_BUDGETS[run_id] = Budget(limit, load_prices(prices), spent_before)
    _CURRENT.budget = budget
    try:
        yield budget
    finally:
        _CURRENT.budget = None


@contextmanager
def metering() -> Iterator[list[Any]]:
    """Within: every judging batch of this thread adds its statistics to the yielded list (``record``)."""
    previous = getattr(_CURRENT, "meter", None)
    meter: list[Any] = []
    _CURRENT.meter = meter
    try:
        yield meter
    finally:
        _CURRENT.meter = previous


def record(stats: Any) -> None:
    """A judging batch's statistics, for the step's usage row (no-op outside ``metering``)."""
    meter = getattr(_CURRENT, "meter", None)
    if meter is not None:
        meter.append(stats)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation, as numpy's default; None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


USAGE_COLUMNS = [
    "checkpoint_id",
    "step",
    "run_id",
    "judge",
    "models",
    "prompts",
    "calls",
    "cache_hits",
    "http_attempts",
    "prompt_tokens",
    "completion_tokens",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "wall_s",
    "cost",
    "currency",
    "not_asked_budget",
    # the client throttling itself: calls in flight at the start, halvings on time-outs, where it settled (0: never)
    "start_concurrency",
    "timeout_cuts",
    "final_concurrency",
    "timeout_extensions",  # time-outs doubled while every call in flight was within the server's slots (none cut)
    "mode",  # online, or batch (the provider's Batch API: judge.batch)
    "pending",  # prompts waiting on a judge batch
    "online_cost",  # what the calls made would have cost online (equal to cost for online calls)
]
