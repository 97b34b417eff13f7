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

import functools
import sys
import textwrap
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.terminal import (
    EXIT_GATES,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_NOT_LEARNT,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_RUN_FAILED,
    clean,
)
from eval_pipeline.core.types import JSONObject, Row
from eval_pipeline.publish.queries import judge_usage_totals, judge_was_asked
from eval_pipeline.scoring.verdict import VERDICTS, Verdict, worst
from eval_pipeline.scoring.verdict import read as read_verdicts
from eval_pipeline.storage.warehouse import Warehouse

if TYPE_CHECKING:  # dagster and argparse only for the annotations: the console imports neither to start
    import argparse
    from collections.abc import Callable, Mapping

    import dagster as dg

    from eval_pipeline.ingest.checkpoints import Checkpoint
    from eval_pipeline.runtime.runs import RunOutcome

UNDECIDED = "not decided"  # a run that failed before its verdict step


def decided(
    wh: Warehouse,
    rubric: RubricConfig,
    ckpt: str,
    run_ids: list[str] | None = None,
    succeeded: bool = False,
    stored: Mapping[str, Verdict] | None = None,
) -> Verdict:
    """The stored verdict of one rubric on one checkpoint (scoring.verdict decided it once, in the run): the one
    every reader sees. With ``run_ids``, the runs of the command that evaluated it: a verdict they decided counts;
    one another run decided (a re-decision that ran at the same time: the ratings sensor, the automation, the UI)
    counts only when they ``succeeded`` (the decisions are decided again only when what they read changed, so the
    stored one is then the current one). A run that failed before deciding leaves an ``undecided`` verdict saying
    so, never the verdict of another run. ``stored``: the rubric's stored verdicts already read, by checkpoint
    (one read for a command's many checkpoints), else this one is read."""
    if stored is not None and ckpt in stored:
        found = [stored[ckpt]]
    else:
        found = read_verdicts(wh, rubric.name, [ckpt])
    if found and (run_ids is None or found[0].run_id in run_ids or succeeded):
        # decided by the command's run, or, its run having succeeded, still as an earlier run decided it (nothing it
        # is decided from changed) or as a later one did: the stored verdict is the current one
        return found[0]
    return Verdict(rubric.name, ckpt, verdict=UNDECIDED, reasons=[("not decided", "the run ended before its verdict")])


def shorten(text: object, width: int = 150, keep_end: bool = False) -> str:
    """``text`` cleaned for a terminal, on one line, cut at a word boundary (never mid-word) with an ellipsis.
    ``keep_end``: the cut is in the middle, so the text's end (a failure's advice: "run again when …") is kept."""
    one = " ".join(clean(text).split())
    if len(one) <= width:
        return one
    if keep_end:
        tail = one[-(width // 3) :].split(" ", 1)[-1]
        head = one[: width - len(tail) - 3].rsplit(" ", 1)[0].rstrip(",;:")
        return f"{head} … {tail}"
    cut = one[: width - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"


REASON_WIDTH = 150  # a reason's lines, indent included


def report_lines(v: Verdict, verbose: bool = False) -> list[str]:
    """The rubric's verdict first, then what decided it, whole (a reason is never cut: the part a person needs is
    often at its end, such as the command that re-judges a parent). ``verbose``: every failed gate as well."""
    out = [f"  {v.rubric:<20} {v.verdict.upper():<16} {clean(v.summary)}"]
    for tag, text in v.reasons:  # whole, wrapped at word boundaries to one screen's width
        out += textwrap.wrap(
            f"{tag} {shorten(text, 2000)}",
            width=REASON_WIDTH,
            initial_indent="      ",
            subsequent_indent="        ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    if verbose:
        for g in v.failed_gates:
            value = "none (nothing to measure)" if g["value"] is None else f"{g['value']:.4g}"
            out.append(
                f"      gate FAILED {g['gate']}: value {value}, threshold {g['threshold']:g} ({clean(g['reason'])})"
            )
    return out


# what each verdict means to a person reading it for the first time, and the command that moves it on
MEANINGS: dict[str, tuple[str, str]] = {
    "regressed": (
        "worse than its parent checkpoint on a headline score, beyond the samples' noise and the rubric's margin",
        "see which samples got worse: `.venv/bin/eval-pipeline view`, the checkpoint's page (each regressed score "
        "links to sample-by-sample differences)",
    ),
    "judge untrusted": (
        "the judge's scores do not agree with the people's ratings well enough to be believed (agreement at a "
        "stated error rate): its numbers are shown, not trusted",
        "rate more samples (`make annotate`: the queue puts first what settles it fastest), or fit the judge to "
        "the ratings (`.venv/bin/eval-pipeline align --rubric <rubric>`, proved on held-out ratings)",
    ),
    "failed gates": (
        "a threshold the rubric sets was missed: each line above names the gate, its value and its threshold",
        'each failed gate with its reason: `.venv/bin/eval-pipeline sql "SELECT checkpoint_id, gate, reason FROM '
        "<rubric>.gates WHERE status = 'failed'\"`",
    ),
    "pending ratings": (
        "nothing failed: too few people's ratings yet to decide whether the judge can be trusted (the line says "
        "about how many more)",
        "rate: `make annotate`; the verdict is decided again as ratings arrive, with no judge call",
    ),
    "pending judge": (
        "nothing failed: judge batches are still running at the provider",
        "`.venv/bin/eval-pipeline run --wait` (or the batch sensor under `make ui`) finishes them",
    ),
    "incomplete": (
        "too much is missing to decide (judge scores, quarantined lines, rejected ratings): the line says what",
        'the reasons row by row: `.venv/bin/eval-pipeline sql "SELECT * FROM main.quarantine LIMIT 20"`',
    ),
    UNDECIDED: ("the run ended before its verdict", "run it again; a failed step is printed above"),
    "passed": ("every gate passed, the judge is trusted and nothing regressed", ""),
}


def what_next(verdicts: Sequence[Verdict]) -> list[str]:
    """What each verdict shown means and what to do next, one entry per verdict present (most urgent first)."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    out = [f"What the {len(verdicts)} result(s) mean, and what to do next:"] if verdicts else []
    for kind, (meaning, step) in MEANINGS.items():
        if kind in counts:
            out.append(f"  {kind.upper()} ({counts[kind]}): {meaning}.")
            out += [f"      next: {step}"] if step else []
    return out


def exit_code(outcomes: list[RunOutcome], verdicts: list[Verdict], fail_on_gates: bool = True) -> int:
    if any(o.interrupted for o in outcomes):
        return EXIT_INTERRUPTED
    if any(not o.success for o in outcomes):
        return EXIT_RUN_FAILED
    if any(v.verdict == "incomplete" for v in verdicts):
        return EXIT_INCOMPLETE
    if any(v.verdict == "pending judge" for v in verdicts):
        return EXIT_PENDING
    if fail_on_gates and any(v.gates_failed for v in verdicts):
        return EXIT_GATES
    if any(v.verdict == UNDECIDED for v in verdicts):  # a verdict the command did not see is never a 0
        return EXIT_NOT_LEARNT
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

    def __call__(self, event: JSONObject) -> None:
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


def evaluate(
    args: argparse.Namespace,
    ckpts: list[Checkpoint],
    defs: dg.Definitions,
    rubrics: dict[str, RubricConfig],
    instance: dg.DagsterInstance,
) -> int:
    """Run each checkpoint in turn: a progress line while it runs, a summary after it, an exit code at the end."""
    from eval_pipeline.core import progress, settings
    from eval_pipeline.runtime.runner import materialize_checkpoints
    from eval_pipeline.runtime.runs import in_flight_elsewhere, reap_dead_runs, register_checkpoints

    wh = Warehouse(settings.warehouse_path())
    outcomes: list[RunOutcome] = []
    reports: list[Verdict] = []
    # every checkpoint of the command claimed at once: the checkpoint sensor (make ui) leaves registered ones alone
    register_checkpoints(instance, [c.checkpoint_id for c in ckpts])
    reap_dead_runs(instance)  # a run whose process died is not "in flight" below
    selected = set(args.rubric) if args.rubric else None
    heads = {
        c.checkpoint_id: f"[{i}/{len(ckpts)}] {clean(c.checkpoint_id)} ({shorten(c.model, 60)})"
        for i, c in enumerate(ckpts, 1)
    }
    todo = []
    elsewhere: list[tuple[str, str]] = []  # (checkpoint, the other run evaluating it)
    wait_s = settings.wait_for_run_s()
    for c in ckpts:
        busy = in_flight_elsewhere(instance, c.checkpoint_id, selected)
        if busy:
            why = (
                f"run {busy} is evaluating it now (the UI or the sensor): not run twice; its verdict is reported "
                f"once it ends (waiting at most {wait_s:g} s, EVAL_WAIT_FOR_RUN; Ctrl-C stops waiting)"
            )
            print(f"{heads[c.checkpoint_id]}: {why}", flush=True)
            elsewhere.append((c.checkpoint_id, busy))
            continue
        todo.append(c)
        for refused in getattr(c, "refused_files", {}).values():
            print(clean(f"{heads[c.checkpoint_id]}: file REFUSED {refused}"), flush=True)
    bar = Progress()

    def starting(ckpt_id: str) -> None:
        bar.clear()
        bar.prefix = f"{heads.get(ckpt_id, ckpt_id)} "

    # read once for the command's checkpoints when the first outcome comes (every run of the command has ended):
    # each rubric's verdicts, and whether any judge was asked at all (else no checkpoint has a usage line)
    @functools.cache
    def stored(name: str) -> Mapping[str, Verdict]:
        return {v.checkpoint_id: v for v in read_verdicts(wh, name, [c.checkpoint_id for c in todo])}

    @functools.cache
    def asked_a_model() -> bool:
        return judge_was_asked(wh, [c.checkpoint_id for c in todo])

    def finished(o: RunOutcome) -> None:
        bar.clear()
        head = heads[o.checkpoint_id]
        outcomes.append(o)
        # an interrupted run is not read back (what it wrote is partial, and Ctrl-C should end the command now)
        readable = wh.exists() and not o.interrupted
        mine = (
            [decided(wh, rubrics[name], o.checkpoint_id, o.run_ids, o.success, stored(name)) for name in o.rubrics]
            if readable
            else []
        )
        reports.extend(mine)
        print(checkpoint_line(head, o, mine), flush=True)
        usage = usage_line(wh, o.checkpoint_id, o.rubrics, o.run_ids) if readable and asked_a_model() else None
        if usage:
            print(f"    {usage}", flush=True)
        for note in getattr(o, "notes", []):
            print(f"    {note}", flush=True)
        for failure in o.failures:
            print(f"    step FAILED {shorten(failure, 300, keep_end=True)}", flush=True)
        for r in mine:
            print("\n".join(report_lines(r, verbose=args.verbose)), flush=True)

    before = {(v.rubric, v.checkpoint_id): v for r in rubrics for v in read_verdicts(wh, r)} if wh.exists() else {}
    followed: list[RunOutcome] = []
    signalled: list[bool] = []  # Ctrl-C or SIGTERM reached the command, whatever run it landed in (or none)
    command_id = uuid.uuid4().hex  # its runs (and `--wait`'s re-evaluations) draw on one judge budget

    def evaluate_checkpoints(ids: list[str]) -> None:
        stored.cache_clear()  # `run --wait` evaluates a checkpoint again: its verdicts are read anew
        asked_a_model.cache_clear()
        with progress.listening(bar):
            materialize_checkpoints(
                defs,
                instance,
                ids,
                selected,
                log_level=_dagster_log_level(args),
                on_outcome=finished,
                on_start=starting,
                on_followed=followed.append,
                on_interrupted=lambda: signalled.append(True),
                budget_scope=command_id,
            )
        bar.clear()

    if todo:  # every one evaluated by another run: this command launches nothing (a settle of its own would decide
        # again what that run is deciding, under it)
        evaluate_checkpoints([c.checkpoint_id for c in todo])
    if getattr(args, "wait", False):
        _wait_for_batches(wh, reports, evaluate_checkpoints)
    runs = {r for o in outcomes for r in o.run_ids}
    for line in followed_lines(wh, rubrics, followed, before, runs, {o.checkpoint_id for o in outcomes}):
        print(line, flush=True)
    others = OtherRuns(instance, wh, rubrics, selected, heads, wait_s, verbose=args.verbose)
    for ckpt_id, run_id in elsewhere:
        reports.extend(
            others.learn(ckpt_id, run_id, {r for c in ckpts if c.checkpoint_id == ckpt_id for r in c.rubric_files})
        )
    stopped = [o for o in followed if o.interrupted]  # Ctrl-C while the graph settled other checkpoints
    if any(o.interrupted for o in outcomes) or stopped or signalled:
        done = [o.checkpoint_id for o in outcomes if not o.interrupted]
        reached = {o.checkpoint_id for o in outcomes}
        again = ", ".join(sorted({o.checkpoint_id for o in stopped}))
        also = (
            f"; stopped deciding {again} again (the next run settles it)"
            if stopped
            else "; the graph's settling stopped (the next run settles it)"
            if signalled and outcomes and not any(o.interrupted for o in outcomes)
            else ""
        )
        print(
            f"eval-pipeline: interrupted; finished before: {', '.join(done) or 'none'}; "
            f"not started: {', '.join(c.checkpoint_id for c in todo if c.checkpoint_id not in reached) or 'none'}"
            + also,
            file=sys.stderr,
        )
    code = (
        EXIT_INTERRUPTED
        if signalled
        else exit_code(outcomes + stopped, reports, fail_on_gates=not args.no_fail_on_gates)
    )
    refused = sum(len(getattr(c, "refused_files", {})) for c in ckpts)
    if not outcomes and todo and not signalled:
        print(
            "eval-pipeline: nothing evaluated: no selected rubric has a file in the selected checkpoint(s) (exit 4)",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_INCOMPLETE
    code = others.code(code)
    if not outcomes and elsewhere:  # every checkpoint evaluated by another run: its verdicts, and their code
        print(_verdict(code, outcomes, reports), file=sys.stderr if code else sys.stdout, flush=True)
        return code
    if refused and code in (EXIT_OK, EXIT_GATES):  # incomplete data outranks failed gates, as in exit_code
        print(f"eval-pipeline: INCOMPLETE: {refused} rubric file(s) refused (exit 4)", file=sys.stderr, flush=True)
        return EXIT_INCOMPLETE
    print(_verdict(code, outcomes, reports), file=sys.stderr if code else sys.stdout, flush=True)
    return code


class OtherRuns:
    """Checkpoints another run was evaluating when the command reached them: the command waits for each such run
    (at most ``wait_s``), then reports its stored verdicts as its own, with their exit code. A run that failed is a
    failed run (exit 1); a verdict not learnt in time is exit 6 (``EXIT_NOT_LEARNT``), never 0."""

    def __init__(
        self,
        instance: dg.DagsterInstance,
        wh: Warehouse,
        rubrics: dict[str, RubricConfig],
        selected: set[str] | None,
        heads: dict[str, str],
        wait_s: float,
        verbose: bool = False,
    ):
        self.instance, self.wh, self.rubrics, self.selected = instance, wh, rubrics, selected
        self.heads, self.wait_s, self.verbose = heads, wait_s, verbose
        self.failed = 0
        self.not_learnt = 0

    def learn(self, ckpt_id: str, run_id: str, files: set[str]) -> list[Verdict]:
        """Wait for ``run_id``, then its verdicts of ``ckpt_id`` (the selected rubrics the checkpoint has files
        of), printed as the command prints its own."""
        import dagster as dg

        from eval_pipeline.defs.inflight import IN_FLIGHT

        head = self.heads.get(ckpt_id, ckpt_id)
        deadline = time.monotonic() + self.wait_s
        run = self.instance.get_run_by_id(run_id)
        while run is not None and run.status in IN_FLIGHT and time.monotonic() < deadline:
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            run = self.instance.get_run_by_id(run_id)
        if run is not None and run.status in IN_FLIGHT:
            self.not_learnt += 1
            print(
                f"{head}: NOT LEARNT: run {run_id} still evaluating it after {self.wait_s:g} s (EVAL_WAIT_FOR_RUN); "
                f"its verdict will be in main.verdicts (exit {EXIT_NOT_LEARNT})",
                flush=True,
            )
            return []
        if run is None or run.status != dg.DagsterRunStatus.SUCCESS:
            self.failed += 1
        elif not self._settled(run, ckpt_id, deadline):
            self.not_learnt += 1
            print(f"{head}: NOT LEARNT: still being decided again after {self.wait_s:g} s (exit 6)", flush=True)
            return []
        names = sorted(n for n in files if n in self.rubrics and (self.selected is None or n in self.selected))
        # the stored verdict once the run and what re-decides after it (the command that launched it, the
        # automation) have ended: the one every reader sees
        ids = None if run is not None and run.status == dg.DagsterRunStatus.SUCCESS else [run_id]
        found = [decided(self.wh, self.rubrics[n], ckpt_id, ids) for n in names] if self.wh.exists() else []
        status = run.status.value if run is not None else "gone"
        word = worst([v.verdict for v in found]).upper() if found else "NOT DECIDED"
        print(f"{head}: {word}: evaluated by run {run_id} ({status.lower()})", flush=True)
        for v in found:
            print("\n".join(report_lines(v, verbose=self.verbose)), flush=True)
        return found

    def _settled(self, run: dg.DagsterRun, ckpt_id: str, deadline: float) -> bool:
        """Whether, by ``deadline``, what decides ``ckpt_id`` again after ``run`` has ended: the command that
        launched it (its process, on this machine), then the deployment settled for it (defs/automation.py's
        ``settling``: no run of it or of the decisions in flight, and the automation sensor evaluated after the last
        run ended and requested nothing)."""
        from eval_pipeline.core.processes import pid_alive
        from eval_pipeline.defs.automation import settling
        from eval_pipeline.defs.inflight import concerns_checkpoint
        from eval_pipeline.runtime.runs import launcher

        pid = launcher(run)
        while pid is not None and pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        while time.monotonic() < deadline:
            if settling(self.instance, concerns_checkpoint(ckpt_id)).settled:
                return True
            time.sleep(0.5)
        return False

    def code(self, code: int) -> int:
        """The command's exit code with what the other runs gave: a failed one is a failed run, a verdict not
        learnt is exit 6 where nothing else said worse."""
        if code == EXIT_INTERRUPTED:
            return code
        if self.failed:
            return EXIT_RUN_FAILED
        if self.not_learnt and code == EXIT_OK:
            return EXIT_NOT_LEARNT
        return code


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


def _dagster_log_level(args: argparse.Namespace) -> str:
    """Dagster's own console log: everything with --verbose, its errors and their stacks with --debug, else
    nothing (each failed step is printed here as one line; the whole log stays in the instance)."""
    if args.verbose:
        return "DEBUG"
    return "ERROR" if getattr(args, "debug", False) else "CRITICAL"


def checkpoint_line(head: str, outcome: RunOutcome, reports: list[Verdict]) -> str:
    """One line per checkpoint, the verdict first: the worst rubric verdict (never "ok" for an incomplete or failed
    run), the rubrics behind it, the time."""
    if outcome.interrupted:
        verdict = "INTERRUPTED"
    elif not outcome.success:
        verdict = "RUN FAILED"
    else:
        verdict = worst([r.verdict for r in reports if r.verdict in VERDICTS]).upper()
    counts = Counter(r.verdict for r in reports)
    order = [*VERDICTS, UNDECIDED]
    detail = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: order.index(kv[0])))
    detail = f"rubrics: {detail}" if detail else ""
    return f"{head}: {verdict}" + (f" ({detail})" if detail else "") + f" in {outcome.seconds:.1f}s"


def _wait_for_batches(wh: Warehouse, reports: list[Verdict], evaluate: Callable[[list[str]], None]) -> None:
    """``run --wait``: until no checkpoint of the command waits on a judge batch, ask every EVAL_JUDGE_BATCH_POLL
    seconds which batches ended (the batch sensor's question, defs.batch_sensor.due) and ``evaluate`` their
    checkpoints again, which reads the results (and may submit the second asks of what a batch did not answer);
    ``evaluate`` reports them into ``reports``, whose pending verdicts of those checkpoints are dropped first."""
    from eval_pipeline.core import settings
    from eval_pipeline.defs.batch_sensor import due

    poll = settings.judge_config().batch_poll_s
    idle = False  # the last look found no batch open for what waits: evaluated once more since
    while waiting := {(r.rubric, r.checkpoint_id) for r in reports if r.verdict == "pending judge"}:
        standing = due(wh, {c for _, c in waiting})
        ready = sorted({c for (rubric, c) in standing.due if (rubric, c) in waiting})
        if not ready and not standing.working and not standing.unreachable:
            if idle:  # evaluated again with nothing open, and still pending: nothing left to wait on
                print(
                    f"eval-pipeline: {len(waiting)} result(s) still pending judge with no judge batch open: nothing "
                    "left to wait on (`eval-pipeline batches --all` lists what was submitted)",
                    flush=True,
                )
                return
            idle, ready = True, sorted({c for _, c in waiting})
        elif not ready:
            working = [_pending_line(sub) for sub in standing.working]
            print(
                f"waiting on {len(working)} judge batch(es): " + "; ".join([*working[:3], *standing.unreachable]),
                flush=True,
            )
            time.sleep(poll)
            continue
        else:
            idle = False
        again = {(rubric, c) for rubric, c in waiting if c in ready}
        reports[:] = [r for r in reports if (r.rubric, r.checkpoint_id) not in again]
        evaluate(ready)


def _pending_line(sub: Row) -> str:
    from eval_pipeline.judge.batch import pending_text

    return f"{sub['rubric']} {sub['checkpoint_id']} {sub['step']}: {pending_text(sub).removeprefix('pending: ')}"


def _verdict(code: int, outcomes: list[RunOutcome], reports: list[Verdict]) -> str:
    failed_gates = sum(r.gates_failed for r in reports)
    failing = sum(bool(r.gates_failed) for r in reports)
    evaluated = len({o.checkpoint_id for o in outcomes})  # `run --wait` evaluates a checkpoint more than once
    summary = {
        EXIT_OK: f"eval-pipeline: ok: {evaluated} checkpoint(s) evaluated, every gate passed, data complete",
        EXIT_RUN_FAILED: f"eval-pipeline: FAILED: {sum(not o.success for o in outcomes)} of {len(outcomes)} run(s) "
        "failed (exit 1)",
        EXIT_INCOMPLETE: f"eval-pipeline: INCOMPLETE: {sum(r.verdict == 'incomplete' for r in reports)} checkpoint x "
        "rubric result(s) rest on incomplete data (exit 4)",
        EXIT_GATES: f"eval-pipeline: GATES FAILED: {failed_gates} gate(s) failed in {failing} checkpoint x rubric "
        "result(s) (exit 3; --no-fail-on-gates to ignore)",
        EXIT_INTERRUPTED: "eval-pipeline: interrupted (exit 130)",
        EXIT_PENDING: f"eval-pipeline: PENDING: {sum(r.verdict == 'pending judge' for r in reports)} checkpoint x "
        "rubric result(s) wait on judge batches in progress (exit 7; nothing failed): the batch sensor, or "
        "`eval-pipeline run --wait`, finishes them; `eval-pipeline batches` lists them",
        EXIT_NOT_LEARNT: f"eval-pipeline: NOT LEARNT: {sum(r.verdict == UNDECIDED for r in reports)} checkpoint x "
        "rubric verdict(s) not seen (exit 6): see main.verdicts",
    }
    text = summary.get(code, f"eval-pipeline: exit {code}")
    if code == EXIT_OK and failed_gates:
        text = f"eval-pipeline: ok: {evaluated} checkpoint(s) evaluated; {failed_gates} gate(s) failed (ignored)"
    return text
