"""What judging costs: tokens, calls, cache hits and latency per judge step (``<rubric>.judge_usage``), money from
an optional price table, and a budget a run stops before exceeding.

Prices: ``EVAL_PRICES`` names a YAML file ::

    currency: USD
    models:                      # per 1M tokens
      gpt-4o-mini: {input: 0.15, output: 0.60}
      smollm2-135m: {input: 0, output: 0}

A model missing from it has no cost (null), never a guessed one.

Budget: ``EVAL_JUDGE_BUDGET`` (in the table's currency) for one run. Before each batch of calls the judge
estimates every prompt's cost from above (one token per 3 characters of the messages, and ``max_tokens`` for
the answer) and asks only the prompts whose estimates fit in what is left; the rest are missing scores with the
reason ``budget``. What the answers really cost is then charged. So a run never spends more than its budget. The
budget is the run's in one process (the CLI, the demo); under the UI's multiprocess executor each step also
counts what the run's earlier steps recorded in ``judge_usage``. With a budget but no price for the judge's
model, the step fails with one line: a budget that cannot be counted is not a budget.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_pipeline.core import settings

CHARS_PER_TOKEN = 3  # the estimate from above of a prompt's tokens (English runs ~4 characters a token)
MESSAGE_OVERHEAD_TOKENS = 8


class BudgetError(ValueError):
    """A budget that cannot be counted (no price for the judge's model), or a price table that cannot be read."""


@dataclass(frozen=True)
class Prices:
    currency: str = "USD"
    per_mtok: dict[str, tuple[float, float]] = field(default_factory=dict)  # model -> (input, output)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        price = self.per_mtok.get(model)
        if price is None:
            return None
        return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def load_prices(path: str | Path | None = None) -> Prices:
    """The price table at ``path`` (default ``EVAL_PRICES``); none configured: an empty table. Read once per
    version of the file (every judging batch asks)."""
    where = path or settings.prices_path()
    if not where:
        return Prices()
    try:
        version = Path(where).stat().st_mtime_ns
    except OSError as exc:
        raise BudgetError(f"price table {where}: cannot be read ({exc})") from None
    return _read_prices(str(where), version)


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
    table = {}
    for model, p in models.items():
        try:
            pin, pout = float(p["input"]), float(p["output"])
        except (TypeError, KeyError, ValueError):
            raise BudgetError(
                f"price table {where}: {model!r} needs numbers 'input' and 'output' (per 1M tokens)"
            ) from None
        if not (math.isfinite(pin) and math.isfinite(pout)) or pin < 0 or pout < 0:
            raise BudgetError(f"price table {where}: {model!r} prices must be finite and >= 0")
        table[str(model)] = (pin, pout)
    return Prices(str(data.get("currency") or "USD"), table)


def estimate_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """A prompt's tokens estimated from above (CHARS_PER_TOKEN)."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD_TOKENS * max(len(messages), 1)


class Budget:
    """What one run may still spend; shared by its judge steps in this process."""

    def __init__(self, limit: float, prices: Prices, spent_before: float = 0.0):
        self.limit, self.prices, self.spent = limit, prices, spent_before
        self._lock = threading.Lock()

    def admit(self, model: str, max_tokens: int, prompts: Sequence[Sequence[dict[str, Any]]]) -> int:
        """How many of ``prompts`` (in order) fit in what is left, each at its estimate from above."""
        price = self.prices.per_mtok.get(model)
        if price is None:
            raise BudgetError(
                f"EVAL_JUDGE_BUDGET is set but the price table has no price for model {model!r} (EVAL_PRICES)"
            )
        with self._lock:
            left = self.limit - self.spent
        n = 0
        for messages in prompts:
            cost = (estimate_tokens(messages) * price[0] + max_tokens * price[1]) / 1e6
            if cost > left:
                break
            left -= cost
            n += 1
        return n

    def charge(self, cost: float | None) -> None:
        with self._lock:
            self.spent += cost or 0.0


_RUN_BUDGETS: dict[str, Budget] = {}
_CURRENT = threading.local()


def current() -> Budget | None:
    """The budget of the run whose judge step is executing in this thread (``spending``), if any."""
    return getattr(_CURRENT, "budget", None)


@contextmanager
def spending(run_id: str, spent_before: float = 0.0) -> Iterator[Budget | None]:
    """Within: the judge calls of this thread draw on the run's budget (``EVAL_JUDGE_BUDGET``), if one is set."""
    try:
        limit = settings.judge_budget()
    except ValueError as exc:
        raise BudgetError(str(exc)) from None
    if limit is None:
        yield None
        return
    budget = _RUN_BUDGETS.get(run_id)
    if budget is None:
        budget = _RUN_BUDGETS[run_id] = Budget(limit, load_prices(), spent_before)
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
]
