"""What a person (or a CI job) sees of a run: a progress line, a summary per checkpoint, and an exit code.

Exit codes (documented in the README):
  0  every checkpoint evaluated, every gate passed, the data complete
  1  a run failed (a step raised; its error is printed in one line)
  2  a usage or configuration error (bad arguments, an invalid rubric YAML)
  3  gates failed (unless --no-fail-on-gates)
  4  incomplete data: judge scores missing, lines quarantined or rating rows rejected above the rubric's
     `completeness` thresholds, or a rating file rejected whole
  130  interrupted (Ctrl-C); what finished is listed
When several apply, the first in the order 1, 4, 3 wins.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import UNPLACED, UNRATED
from eval_pipeline.core.terminal import (
    EXIT_GATES,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    clean,
)
from eval_pipeline.storage.warehouse import Warehouse

# a rubric's verdict, worst first (a checkpoint's is the worst of its rubrics')
VERDICTS = ("incomplete", "regressed", "failed gates", "judge untrusted", "pending ratings", "passed")


@dataclass
class RubricReport:
    rubric: str
    lines: int = 0
    valid: int = 0
    quarantined: int = 0
    judge_scores: int = 0
    judge_missing: int = 0
    judge_reasons: dict[str, int] = field(default_factory=dict)
    rating_rows: int = 0
    rating_rejected: int = 0
    rating_unplaced: int = 0  # rows of the ratings folder naming no known checkpoint (not this one's to count)
    rating_unrated: int = 0  # rows with no score written yet (a template being filled in)
    rating_files_rejected: list[str] = field(default_factory=list)
    gates_total: int = 0
    gates_failed: list[tuple[str, float | None, float, str]] = field(default_factory=list)
    gates_pending: list[tuple[str, str]] = field(default_factory=list)  # (gate, reason): not enough data yet
    failed_kinds: dict[str, str] = field(default_factory=dict)  # failed or pending gate -> its kind

    @property
    def verdict(self) -> str:
        """The first of VERDICTS that holds."""
        kinds = {self.failed_kinds.get(g[0], "") for g in self.gates_failed}
        if self.incomplete:
            return "incomplete"
        if "regression" in kinds:
            return "regressed"
        if kinds - {"judge_reliability"}:
            return "failed gates"
        if "judge_reliability" in kinds:
            return "judge untrusted"
        if self.gates_pending:
            return "pending ratings"
        return "passed"

    incomplete: list[str] = field(default_factory=list)


def _count(wh: Warehouse, schema: str, table: str, where: str, params: list[Any]) -> int:
    if not wh.table_exists(schema, table):
        return 0
    return int(wh.query_rows(f'SELECT count(*) FROM "{schema}"."{table}" WHERE {where}', params)[0][0])


def assess(wh: Warehouse, rubric: RubricConfig, ckpt: str) -> RubricReport:
    """What one rubric's evaluation of one checkpoint left in the warehouse, against its completeness rules."""
    from eval_pipeline.defs.checks import missing_judge_scores

    r, c = RubricReport(rubric.name), rubric.completeness
    with wh.session() as s:
        r.lines = _count(s, rubric.name, "raw_outputs", "checkpoint_id = ?", [ckpt])
        r.valid = _count(s, rubric.name, "samples", "checkpoint_id = ?", [ckpt])
        where = "rubric = ? AND checkpoint_id = ? AND stage = ?"
        r.quarantined = _count(s, "main", "quarantine", where, [rubric.name, ckpt, "validate"])
        r.judge_missing, r.judge_scores, r.judge_reasons = missing_judge_scores(s, rubric, ckpt)
        rejected = (
            s.query_df(
                f"SELECT source_file, line_number, reason FROM main.quarantine WHERE {where}",
                [rubric.name, ckpt, "ratings"],
            )
            if s.table_exists("main", "quarantine")
            else None
        )
        if s.table_exists(rubric.name, "human_ratings"):
            r.rating_rows = int(
                s.query_rows(
                    f'SELECT count(DISTINCT (source_file, line_number)) FROM "{rubric.name}".human_ratings '
                    "WHERE checkpoint_id = ?",
                    [ckpt],
                )[0][0]
            )
        if rejected is not None and len(rejected):
            unplaced = rejected.reason.str.startswith(UNPLACED)
            unrated = rejected.reason.str.startswith(UNRATED)
            r.rating_unplaced, r.rating_unrated = int(unplaced.sum()), int(unrated.sum())
            rejected = rejected[~unplaced & ~unrated]
            whole = rejected[rejected.reason.str.startswith(("file header lacks", "file refused"))]
            r.rating_files_rejected = sorted(set(whole.source_file))
            r.rating_rejected = int(len(rejected) - (whole.line_number == 1).sum())
            r.rating_rows += r.rating_rejected
        if s.table_exists(rubric.name, "gates"):
            gates = s.query_df(f'SELECT * FROM "{rubric.name}".gates WHERE checkpoint_id = ? ORDER BY gate', [ckpt])
            if "status" not in gates.columns:  # written before gates could be pending
                gates["status"] = None
            status = gates.status.where(gates.status.notna(), gates.passed.map({True: "passed", False: "failed"}))
            r.gates_total = len(gates)
            r.gates_failed = [
                (g.gate, None if g.value != g.value else float(g.value), float(g.threshold), g.reason)
                for g, st in zip(gates.itertuples(), status)
                if st == "failed"
            ]
            r.gates_pending = [(g.gate, g.reason) for g, st in zip(gates.itertuples(), status) if st == "pending"]
            r.failed_kinds = {str(g.gate): str(g.kind) for g, st in zip(gates.itertuples(), status) if st != "passed"}
    if r.judge_scores and r.judge_missing / r.judge_scores > c.max_missing_judge_scores:
        top = next(iter(r.judge_reasons), "")
        r.incomplete.append(
            f"{r.judge_missing} of {r.judge_scores} judge scores missing "
            f"({r.judge_missing / r.judge_scores:.0%}, at most {c.max_missing_judge_scores:.0%}): {top}"
        )
    if r.lines and r.quarantined / r.lines > c.max_quarantined_lines:
        r.incomplete.append(
            f"{r.quarantined} of {r.lines} lines quarantined "
            f"({r.quarantined / r.lines:.0%}, at most {c.max_quarantined_lines:.0%})"
        )
    if r.rating_rows and r.rating_rejected / r.rating_rows > c.max_rejected_rating_rows:
        r.incomplete.append(
            f"{r.rating_rejected} of {r.rating_rows} rating rows rejected "
            f"({r.rating_rejected / r.rating_rows:.0%}, at most {c.max_rejected_rating_rows:.0%})"
        )
    if r.rating_files_rejected and not c.rating_files_rejected:
        r.incomplete.append(f"rating file(s) rejected whole: {', '.join(r.rating_files_rejected)}")
    return r


def shorten(text: object, width: int = 150) -> str:
    """``text`` cleaned for a terminal, on one line, cut at a word boundary (never mid-word) with an ellipsis."""
    one = " ".join(clean(text).split())
    if len(one) <= width:
        return one
    cut = one[: width - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def report_lines(r: RubricReport, verbose: bool = False) -> list[str]:
    """The rubric's verdict first, then what decided it: regressions, incompleteness, trust in the judge (one
    line), the other failed gates grouped by kind, pending gates. ``verbose``: every gate on its own line, whole."""
    width = 10_000 if verbose else 150
    parts = [f"{r.valid}/{r.lines} lines valid"]
    if r.judge_scores:
        parts.append(f"judge {r.judge_scores - r.judge_missing}/{r.judge_scores}")
    if r.rating_rows:
        parts.append(f"{r.rating_rows} rating rows" + (f" ({r.rating_rejected} rejected)" if r.rating_rejected else ""))
    if r.rating_unplaced:
        parts.append(f"{r.rating_unplaced} unplaced rating rows")
    if r.rating_unrated:
        parts.append(f"{r.rating_unrated} rows not rated yet")
    if r.gates_total:
        passed = r.gates_total - len(r.gates_failed) - len(r.gates_pending)
        pend = f", {len(r.gates_pending)} pending" if r.gates_pending else ""
        parts.append(f"gates {passed}/{r.gates_total} passed{pend}")
    out = [f"  {r.rubric:<20} {r.verdict.upper():<16} " + " · ".join(parts)]
    by_kind: dict[str, list[tuple[str, float | None, float, str]]] = {}
    for g in r.gates_failed:
        by_kind.setdefault(r.failed_kinds.get(g[0], ""), []).append(g)
    for _name, _, _, reason in by_kind.pop("regression", []):
        out.append(f"      REGRESSED {shorten(reason, width)}")
    out += [f"      INCOMPLETE {shorten(msg, width)}" for msg in r.incomplete]
    trust = by_kind.pop("judge_reliability", [])
    if trust:
        overall = min(trust, key=lambda g: len(g[0]))  # the gate itself; its parts are named <gate>_<dimension>
        dims = [(g[0].removeprefix(overall[0] + "_"), g[3]) for g in trust if g is not overall]
        untrusted = [d for d, why in dims if not why.startswith("trusted")]  # the judge's verdict on the dimension
        drifts = [d for d, why in dims if why.startswith("trusted, but drifts")]  # this checkpoint's own ratings
        if verbose or not dims:
            out.append(f"      judge {shorten(overall[3], width)}")
        else:
            said = [f"untrusted on {', '.join(untrusted)}"] if untrusted else []
            said += [f"drifts on this checkpoint on {', '.join(drifts)}"] if drifts else []
            rest = [d for d, _ in dims if d not in untrusted and d not in drifts]
            said += [f"{shorten(overall[3].split(':')[0], 40)} on {', '.join(rest)}"] if rest else []
            out.append(f"      judge {'; '.join(said)}")
    for kind, gates in sorted(by_kind.items()):
        if verbose:
            for name, value, threshold, reason in gates:
                shown = f"value {_number(value)}, threshold {threshold:g}"
                out.append(f"      gate FAILED {name}: {shown} ({shorten(reason, width)})")
            continue
        shown = "; ".join(f"{name} {_number(value)} (threshold {threshold:g})" for name, value, threshold, _ in gates)
        out.append(f"      failed {kind or 'gate'}: {shorten(shown, width)}")
    pending = r.gates_pending
    trust_pending = [p for p in pending if r.failed_kinds.get(p[0]) == "judge_reliability"]
    if trust_pending and not verbose:  # the judge's verdict once, not once per dimension
        pending = [p for p in pending if p not in trust_pending]
        out.append(f"      judge pending: {shorten(trust_pending[0][1].split('pending: ')[-1], width - 21)}")
    for name, reason in pending:
        out.append(f"      pending {name}: {shorten(reason.removeprefix('pending: '), width)}")
    return out


def exit_code(outcomes: list[Any], reports: list[RubricReport], fail_on_gates: bool = True) -> int:
    if any(o.interrupted for o in outcomes):
        return EXIT_INTERRUPTED
    if any(not o.success for o in outcomes):
        return EXIT_RUN_FAILED
    if any(r.incomplete for r in reports):
        return EXIT_INCOMPLETE
    if fail_on_gates and any(r.gates_failed for r in reports):
        return EXIT_GATES
    return EXIT_OK


class Progress:
    """A listener for progress events: on a terminal one status line, redrawn; elsewhere a plain line when
    a rubric's judging ends (calls, cache hits, missing)."""

    def __init__(self, stream: IO[str] | None = None, prefix: str = ""):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.prefix = prefix
        self.step = ""
        self._drawn = 0.0

    def __call__(self, event: dict[str, Any]) -> None:
        if event["kind"] == "step" and event.get("phase") == "start":
            self.step = f"{event['rubric']} · {event['asset']}"
            self._draw(self.step)
        elif event["kind"] == "judge":
            done, total = event["done"], event["total"]
            rate = event["calls"] / event["seconds"] if event["seconds"] > 0 else 0.0
            if self.tty:
                width = 24
                filled = int(width * done / total) if total else width
                bar = "█" * filled + "░" * (width - filled)
                self._draw(
                    f"{self.step} {bar} {done}/{total} · {rate:.1f}/s · cache {event['hits']} · "
                    f"missing {event['missing']}",
                    force=done == total,
                )
            elif done == total and event["calls"]:
                self.stream.write(
                    f"{self.prefix}  {event['rubric']}: judged {total} prompts, {event['calls']} calls "
                    f"({rate:.1f}/s), {event['hits']} cached, {event['missing']} missing\n"
                )
                self.stream.flush()

    def _draw(self, text: str, force: bool = False) -> None:
        if not self.tty:
            return
        now = time.monotonic()
        if force or now - self._drawn > 0.1:
            self._drawn = now
            self.stream.write(f"\r\033[K{self.prefix}{text}"[:200])
            self.stream.flush()

    def clear(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()


def evaluate(args: Any, ckpts: list[Any], defs: Any, rubrics: dict[str, Any], instance: Any) -> int:
    """Run each checkpoint in turn: a progress line while it runs, a summary after it, an exit code at the end."""
    from eval_pipeline.core import progress, settings
    from eval_pipeline.defs.runner import (
        in_flight_elsewhere,
        materialize_checkpoints,
        reap_dead_runs,
        register_checkpoints,
    )

    wh = Warehouse(settings.warehouse_path())
    outcomes, reports = [], []
    # every checkpoint of the command claimed at once: the checkpoint sensor (make ui) leaves registered ones alone
    register_checkpoints(instance, [c.checkpoint_id for c in ckpts])
    reap_dead_runs(instance)  # a run whose process died is not "in flight" below
    selected = set(args.rubric) if args.rubric else None
    heads = {
        c.checkpoint_id: f"[{i}/{len(ckpts)}] {clean(c.checkpoint_id)} ({clean(c.model)})"
        for i, c in enumerate(ckpts, 1)
    }
    todo = []
    for c in ckpts:
        busy = in_flight_elsewhere(instance, c.checkpoint_id)
        if busy:
            why = f"SKIPPED: run {busy} is evaluating it now (the UI or the sensor); not run twice"
            print(f"{heads[c.checkpoint_id]}: {why}", flush=True)
            continue
        todo.append(c)
        for refused in getattr(c, "refused_files", {}).values():
            print(clean(f"{heads[c.checkpoint_id]}: file REFUSED {refused}"), flush=True)
    bar = Progress()

    def starting(ckpt_id: str) -> None:
        bar.clear()
        bar.prefix = f"{heads[ckpt_id]} "

    def finished(o: Any) -> None:
        bar.clear()
        head = heads[o.checkpoint_id]
        outcomes.append(o)
        # an interrupted run is not read back (what it wrote is partial, and Ctrl-C should end the command now)
        readable = wh.exists() and not o.interrupted
        mine = [assess(wh, rubrics[name], o.checkpoint_id) for name in o.rubrics] if readable else []
        reports.extend(mine)
        print(checkpoint_line(head, o, mine), flush=True)
        usage = usage_line(wh, o.checkpoint_id, o.rubrics, o.run_ids) if readable else None
        if usage:
            print(f"    {usage}", flush=True)
        for failure in o.failures:
            print(f"    step FAILED {shorten(failure, 300)}", flush=True)
        for r in mine:
            print("\n".join(report_lines(r, verbose=args.verbose)), flush=True)

    with progress.listening(bar):
        materialize_checkpoints(
            defs,
            instance,
            [c.checkpoint_id for c in todo],
            selected,
            log_level=_dagster_log_level(args),
            on_outcome=finished,
            on_start=starting,
        )
    bar.clear()
    if any(o.interrupted for o in outcomes):
        done = [o.checkpoint_id for o in outcomes if not o.interrupted]
        reached = {o.checkpoint_id for o in outcomes}
        print(
            f"eval-pipeline: interrupted; finished before: {', '.join(done) or 'none'}; "
            f"not started: {', '.join(c.checkpoint_id for c in todo if c.checkpoint_id not in reached) or 'none'}",
            file=sys.stderr,
        )
    code = exit_code(outcomes, reports, fail_on_gates=not args.no_fail_on_gates)
    refused = sum(len(getattr(c, "refused_files", {})) for c in ckpts)
    if not outcomes:
        print(
            "eval-pipeline: nothing evaluated: no selected rubric has a file in the selected checkpoint(s) (exit 4)",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_INCOMPLETE
    if refused and code in (EXIT_OK, EXIT_GATES):  # incomplete data outranks failed gates, as in exit_code
        print(f"eval-pipeline: INCOMPLETE: {refused} rubric file(s) refused (exit 4)", file=sys.stderr, flush=True)
        return EXIT_INCOMPLETE
    print(_verdict(code, outcomes, reports), file=sys.stderr if code else sys.stdout, flush=True)
    return code


def usage_line(wh: Warehouse, ckpt: str, rubrics: list[str], run_ids: list[str] | None = None) -> str | None:
    """What judging this checkpoint cost in these runs (``run_ids``; else its latest rows): calls, cache hits,
    tokens, latency percentiles (the slowest step's), money when the price table covers the model."""
    try:
        with wh.session() as s:
            if not s.table_exists("main", "judge_usage"):
                return None
            marks = ", ".join("?" for _ in rubrics)
            runs = ", ".join("?" for _ in run_ids or [])
            where = f"checkpoint_id = ? AND rubric IN ({marks})" + (f" AND run_id IN ({runs})" if run_ids else "")
            row = s.query_rows(
                "SELECT sum(calls), sum(cache_hits), sum(prompt_tokens), sum(completion_tokens), "
                "max(latency_p50_ms), max(latency_p90_ms), sum(cost), "
                "count(*) FILTER (WHERE cost IS NULL AND calls > 0), "
                f"any_value(currency), sum(not_asked_budget) FROM main.judge_usage WHERE {where}",
                [ckpt, *rubrics, *(run_ids or [])],
            )[0]
    except Exception:  # noqa: BLE001 - a warehouse from before usage was recorded: no line
        return None
    calls, hits, tin, tout, p50, p90, cost, unpriced, currency, unasked = row
    if not calls and not hits:  # nothing asked of an LLM (the heuristic judge)
        return None
    text = f"judge usage: {int(calls)} calls, {int(hits)} cached, {_k(tin)} in / {_k(tout)} out tokens"
    if p50 is not None:
        text += f", latency p50 {p50:.0f} ms p90 {p90:.0f} ms"
    if calls and not unpriced and cost is not None:
        text += f", cost {cost:.4f} {currency}"
    elif calls:
        text += " (no price: EVAL_PRICES)"
    if unasked:
        text += f"; {int(unasked)} prompts not asked: budget reached"
    return text


def _k(n: Any) -> str:
    n = int(n or 0)
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def _dagster_log_level(args: Any) -> str:
    """Dagster's own console log: everything with --verbose, its errors and their stacks with --debug, else
    nothing (each failed step is printed here as one line; the whole log stays in the instance)."""
    if args.verbose:
        return "DEBUG"
    return "ERROR" if getattr(args, "debug", False) else "CRITICAL"


def checkpoint_line(head: str, outcome: Any, reports: list[RubricReport]) -> str:
    """One line per checkpoint, the verdict first: the worst rubric verdict (never "ok" for an incomplete or failed
    run), the rubrics behind it, the time."""
    if outcome.interrupted:
        verdict = "INTERRUPTED"
    elif not outcome.success:
        verdict = "RUN FAILED"
    else:
        verdict = min((r.verdict for r in reports), key=VERDICTS.index, default="passed").upper()
    counts = Counter(r.verdict for r in reports)
    detail = ", ".join(f"{n} {v}" for v, n in counts.items())
    return f"{head}: {verdict}" + (f" ({detail})" if detail else "") + f" in {outcome.seconds:.1f}s"


def _verdict(code: int, outcomes: list[Any], reports: list[Any]) -> str:
    failed_gates = sum(len(r.gates_failed) for r in reports)
    summary = {
        EXIT_OK: f"eval-pipeline: ok: {len(outcomes)} checkpoint(s) evaluated, every gate passed, data complete",
        EXIT_RUN_FAILED: f"eval-pipeline: FAILED: {sum(not o.success for o in outcomes)} of {len(outcomes)} run(s) "
        "failed (exit 1)",
        EXIT_INCOMPLETE: f"eval-pipeline: INCOMPLETE: {sum(bool(r.incomplete) for r in reports)} checkpoint x rubric "
        "result(s) rest on incomplete data (exit 4)",
        EXIT_GATES: f"eval-pipeline: GATES FAILED: {failed_gates} gate(s) failed "
        "(exit 3; --no-fail-on-gates to ignore)",
        EXIT_INTERRUPTED: "eval-pipeline: interrupted (exit 130)",
    }
    text = summary.get(code, f"eval-pipeline: exit {code}")
    if code == EXIT_OK and failed_gates:
        text = f"eval-pipeline: ok: {len(outcomes)} checkpoint(s) evaluated; {failed_gates} gate(s) failed (ignored)"
    return text
