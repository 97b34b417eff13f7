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
from dataclasses import dataclass, field
from typing import IO, Any

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.storage.warehouse import Warehouse

EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_GATES, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


def clean(text: object) -> str:
    """Text safe for a terminal: control characters (escape codes) shown escaped, never interpreted."""
    return "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode() for ch in str(text))


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
    rating_files_rejected: list[str] = field(default_factory=list)
    gates_total: int = 0
    gates_failed: list[tuple[str, float | None, float, str]] = field(default_factory=list)
    gates_pending: list[tuple[str, str]] = field(default_factory=list)  # (gate, reason): not enough data yet
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
            whole = rejected[rejected.reason.str.startswith("file header lacks")]
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


def report_lines(r: RubricReport) -> list[str]:
    """One line per rubric, then one per failed gate and per completeness problem."""
    parts = [f"{r.lines} lines: {r.valid} valid, {r.quarantined} quarantined"]
    if r.judge_scores:
        parts.append(f"judge {r.judge_scores - r.judge_missing}/{r.judge_scores} scored")
    if r.rating_rows:
        parts.append(f"ratings {r.rating_rows} rows, {r.rating_rejected} rejected")
    if r.gates_total:
        passed = r.gates_total - len(r.gates_failed) - len(r.gates_pending)
        parts.append(
            f"gates {passed}/{r.gates_total} passed" + (f", {len(r.gates_pending)} pending" if r.gates_pending else "")
        )
    out = [f"    {r.rubric:<20} " + " · ".join(parts)]
    for name, value, threshold, reason in r.gates_failed:
        shown = "n/a" if value is None else f"{value:.3g}"
        out.append(f"      gate FAILED {name}: value {shown}, threshold {threshold:g} ({clean(reason)[:160]})")
    for name, reason in r.gates_pending:
        out.append(f"      gate PENDING {name}: {clean(reason)[:200]}")
    out += [f"      INCOMPLETE {clean(msg)[:200]}" for msg in r.incomplete]
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


def evaluate(args: Any, ckpts: list, defs: Any, rubrics: dict[str, Any], instance: Any) -> int:
    """Run each checkpoint in turn: a progress line while it runs, a summary after it, an exit code at the end."""
    from eval_pipeline.core import progress, settings
    from eval_pipeline.defs.runner import materialize_checkpoints

    wh = Warehouse(settings.warehouse_path())
    outcomes, reports = [], []
    selected = set(args.rubric) if args.rubric else None
    for i, c in enumerate(ckpts, start=1):
        head = f"[{i}/{len(ckpts)}] {clean(c.checkpoint_id)} ({clean(c.model)})"
        bar = Progress(prefix=f"{head} ")
        with progress.listening(bar):
            out = materialize_checkpoints(
                defs, instance, [c.checkpoint_id], selected, log_level="DEBUG" if args.verbose else "WARNING"
            )
        bar.clear()
        for o in out:
            outcomes.append(o)
            status = "interrupted" if o.interrupted else "ok" if o.success else "FAILED"
            print(f"{head}: {status} in {o.seconds:.1f}s (run {o.run_id[:8] or '-'})", flush=True)
            for failure in o.failures:
                print(f"    step FAILED {clean(failure)[:300]}", flush=True)
            for name in o.rubrics:
                if wh.exists():
                    r = assess(wh, rubrics[name], o.checkpoint_id)
                    reports.append(r)
                    print("\n".join(report_lines(r)), flush=True)
        if any(o.interrupted for o in out):
            done = [o.checkpoint_id for o in outcomes if not o.interrupted]
            print(
                f"eval-pipeline: interrupted; finished before: {', '.join(done) or 'none'}; "
                f"not started: {', '.join(x.checkpoint_id for x in ckpts[i:]) or 'none'}",
                file=sys.stderr,
            )
            break
    code = exit_code(outcomes, reports, fail_on_gates=not args.no_fail_on_gates)
    print(_verdict(code, outcomes, reports), file=sys.stderr if code else sys.stdout, flush=True)
    return code


def _verdict(code: int, outcomes: list, reports: list) -> str:
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
