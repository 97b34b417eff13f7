"""What else a command prints: the verdicts new ratings decided again, a checkpoint's judge usage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.terminal import clean
from eval_pipeline.publish.queries import judge_usage_totals
from eval_pipeline.scoring.verdict import Verdict
from eval_pipeline.scoring.verdict import read as read_verdicts
from eval_pipeline.storage.warehouse import Warehouse

if TYPE_CHECKING:
    from eval_pipeline.runtime.outcome import RunOutcome


def followed_lines(
    wh: Warehouse,
    rubrics: dict[str, RubricConfig],
    followed: list[RunOutcome],
    before: dict[tuple[str, str], Verdict],
    runs: set[str] | None = None,
    command: set[str] | None = None,
) -> list[str]:
    """What new ratings changed for checkpoints outside the command: which were read again, and each verdict decided
    again by the command's runs (``runs``; the checkpoints of the command: ``command``), before and after (none of
    it asked the judge). A verdict whose inputs did not change is not decided again, so it is not listed."""
    out = []
    reread = [o for o in followed if o.purpose == "ratings"]
    if reread:
        names = ", ".join(f"{o.checkpoint_id} ({', '.join(o.rubrics)})" for o in reread)
        out.append(f"ratings changed since these were decided, read again: {names}")
    for o in followed:
        if o.purpose == "ratings" and not o.success:
            out.append(f"  {o.checkpoint_id or 'every checkpoint'} ({', '.join(o.rubrics)}): RUN FAILED "
                       f"{'; '.join(o.failures)[:300]}")  # fmt: skip
    runs = runs or set()
    runs |= {r for o in followed for r in o.run_ids}
    again = []
    if runs and wh.exists():
        for name in sorted(rubrics):
            for now in read_verdicts(wh, name):
                if now.run_id in runs and now.checkpoint_id not in (command or set()):
                    was = before.get((name, now.checkpoint_id))
                    if was is None or was.row() != now.row():
                        again.append("  " + clean(_moved(name, now.checkpoint_id, was, now)))
    if again:
        out.append("decided again, what they are decided from having changed (no judge call):")
    return out + again


def _moved(rubric: str, ckpt: str, was: Verdict | None, now: Verdict) -> str:
    if was is None:
        return f"{rubric} {ckpt}: {now.verdict} (judge {now.trust}, {now.rated} rated samples)"
    parts = [f"{was.verdict} -> {now.verdict}" if was.verdict != now.verdict else f"still {now.verdict}"]
    parts.append(f"judge {was.trust} -> {now.trust}" if was.trust != now.trust else f"judge still {now.trust}")
    if was.rated != now.rated:
        parts.append(f"rated samples {was.rated} -> {now.rated}")
    return f"{rubric} {ckpt}: " + "; ".join(parts)


def usage_line(wh: Warehouse, ckpt: str, rubrics: list[str], run_ids: list[str] | None = None) -> str | None:
    """What judging this checkpoint cost in these runs (``run_ids``; else its latest rows): calls, cache hits,
    tokens, latency percentiles (the slowest step's), money when the price table covers the model."""
    try:
        with wh.session() as s:
            if not s.table_exists("main", "judge_usage"):
                return None
            row = judge_usage_totals(s, ckpt, rubrics, run_ids)
    except Exception:  # noqa: BLE001 - a warehouse from before usage was recorded: no line
        return None
    calls, hits, tin, tout, p50, p90, cost, unpriced, currency, unasked, cuts, settled, online, batch, waiting = row
    if not calls and not hits and not waiting:  # nothing asked of an LLM (the heuristic judge)
        return None
    text = f"judge usage: {int(calls)} calls, {int(hits)} cached, {_k(tin)} in / {_k(tout)} out tokens"
    if p50 is not None:
        text += f", latency p50 {_ms(p50)} p90 {_ms(p90)}"
    if calls and not unpriced and cost is not None:
        text += f", cost {cost:.4f} {currency}"
    elif calls:
        text += " (no price: EVAL_PRICES)"
    if calls and not unpriced and online is not None and batch is not None:
        text += f" (batch {batch:.4f}; online would have cost {online:.4f})"
    if waiting:
        text += f"; {int(waiting)} prompts waiting on judge batches"
    if unasked:
        text += f"; {int(unasked)} prompts not asked: budget reached"
    if cuts:
        text += f"; throttled: halved {int(cuts)} time(s) on time-outs" + (
            f", settled at {int(settled)} in flight" if settled else ""
        )
    return text


def _ms(value: float) -> str:
    """A latency as a person reads it: ms below 10 s, seconds above ("p50 41.3 s", not "p50 41268 ms")."""
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


def _k(n: float | None) -> str:
    n = int(n or 0)
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)
