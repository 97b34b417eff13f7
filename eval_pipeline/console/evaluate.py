"""The evaluating commands (`run`, `backfill`) as a person sees them: the runtime evaluates and waits
(runtime.runner, runtime.command), the console prints what it is told, in order, and the exit code at the end."""

from __future__ import annotations

import functools
import sys
import uuid
from typing import TYPE_CHECKING

import eval_pipeline.console.verdicts as said
from eval_pipeline.console.lines import followed_lines, usage_line
from eval_pipeline.console.progress import Progress
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.terminal import (
    EXIT_GATES,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_NOT_LEARNT,
    EXIT_OK,
    EXIT_RUN_FAILED,
    clean,
)
from eval_pipeline.publish.queries import judge_was_asked
from eval_pipeline.scoring.verdict import Verdict, worst
from eval_pipeline.scoring.verdict import read as read_verdicts
from eval_pipeline.storage.warehouse import Warehouse

if TYPE_CHECKING:  # dagster and argparse only for the annotations: the console imports neither to start
    import argparse
    from collections.abc import Mapping

    import dagster as dg

    from eval_pipeline.ingest.checkpoints import Checkpoint
    from eval_pipeline.runtime.outcome import RunOutcome


def evaluate(
    args: argparse.Namespace,
    ckpts: list[Checkpoint],
    defs: dg.Definitions,
    rubrics: dict[str, RubricConfig],
    instance: dg.DagsterInstance,
) -> int:
    """Run each checkpoint in turn: a progress line while it runs, a summary after it, an exit code at the end."""
    from eval_pipeline.core import progress, settings
    from eval_pipeline.runtime.command import batch_waits, busy, claim
    from eval_pipeline.runtime.runner import Followed, Settled, Started, evaluation_events

    wh = Warehouse()
    outcomes: list[RunOutcome] = []
    reports: list[Verdict] = []
    claim(instance, [c.checkpoint_id for c in ckpts])  # every checkpoint of the command at once
    selected = set(args.rubric) if args.rubric else None
    heads = {
        c.checkpoint_id: f"[{i}/{len(ckpts)}] {clean(c.checkpoint_id)} ({said.shorten(c.model, 60)})"
        for i, c in enumerate(ckpts, 1)
    }
    wait_s = settings.wait_for_run_s()
    elsewhere = busy(instance, [c.checkpoint_id for c in ckpts], selected)
    todo = [c for c in ckpts if c.checkpoint_id not in elsewhere]
    for c in ckpts:
        if c.checkpoint_id in elsewhere:
            why = (
                f"run {elsewhere[c.checkpoint_id]} is evaluating it now (the UI or the sensor): not run twice; its "
                f"verdict is reported once it ends (waiting at most {wait_s:g} s, EVAL_WAIT_FOR_RUN; Ctrl-C stops "
                "waiting)"
            )
            print(f"{heads[c.checkpoint_id]}: {why}", flush=True)
            continue
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
        outcomes.append(o)
        # an interrupted run is not read back (what it wrote is partial, and Ctrl-C should end the command now)
        readable = wh.exists() and not o.interrupted
        mine = (
            [said.decided(wh, rubrics[name], o.checkpoint_id, o.run_ids, o.success, stored(name)) for name in o.rubrics]
            if readable
            else []
        )
        reports.extend(mine)
        print(said.checkpoint_line(heads[o.checkpoint_id], o, mine), flush=True)
        usage = usage_line(wh, o.checkpoint_id, o.rubrics, o.run_ids) if readable and asked_a_model() else None
        lines = ([usage] if usage else []) + list(getattr(o, "notes", []))
        lines += [f"step FAILED {said.shorten(failure, 300, keep_end=True)}" for failure in o.failures]
        for line in lines:
            print(f"    {line}", flush=True)
        for r in mine:
            print("\n".join(said.report_lines(r, verbose=args.verbose)), flush=True)

    before = {(v.rubric, v.checkpoint_id): v for r in rubrics for v in read_verdicts(wh, r)} if wh.exists() else {}
    followed: list[RunOutcome] = []
    signalled: list[bool] = []  # Ctrl-C or SIGTERM reached the command, whatever run it landed in (or none)
    command_id = uuid.uuid4().hex  # its runs (and `--wait`'s re-evaluations) draw on one judge budget

    def evaluate_checkpoints(ids: list[str]) -> None:
        stored.cache_clear()  # `run --wait` evaluates a checkpoint again: its verdicts are read anew
        asked_a_model.cache_clear()
        with progress.listening(bar):
            for event in evaluation_events(
                defs, instance, ids, selected, log_level=dagster_log_level(args), budget_scope=command_id, claimed=True
            ):
                if isinstance(event, Started):
                    starting(event.checkpoint_id)
                elif isinstance(event, Followed):
                    followed.append(event.outcome)
                elif isinstance(event, Settled):
                    finished(event.outcome)
                else:
                    signalled.append(True)
        bar.clear()

    if todo:  # every one evaluated by another run: this command launches nothing (a settle of its own would decide
        # again what that run is deciding, under it)
        evaluate_checkpoints([c.checkpoint_id for c in todo])
    if getattr(args, "wait", False):

        def pending() -> set[tuple[str, str]]:
            return {(r.rubric, r.checkpoint_id) for r in reports if r.verdict == "pending judge"}

        for step in batch_waits(wh, pending, settings.judge_config().batch_poll_s):
            if step.kind == "waiting":
                print(f"waiting on {step.count} judge batch(es): " + "; ".join(step.lines), flush=True)
            elif step.kind == "nothing left":
                print(
                    f"eval-pipeline: {step.count} result(s) still pending judge with no judge batch open: nothing "
                    "left to wait on (`eval-pipeline batches --all` lists what was submitted)",
                    flush=True,
                )
            else:  # their verdicts are reported again
                reports[:] = [
                    r for r in reports if not (r.verdict == "pending judge" and r.checkpoint_id in step.checkpoints)
                ]
                evaluate_checkpoints(step.checkpoints)
    runs = {r for o in outcomes for r in o.run_ids}
    for line in followed_lines(wh, rubrics, followed, before, runs, {o.checkpoint_id for o in outcomes}):
        print(line, flush=True)
    others = OtherRuns(instance, wh, rubrics, selected, heads, wait_s, verbose=args.verbose)
    for ckpt_id, run_id in elsewhere.items():
        reports.extend(
            others.learn(ckpt_id, run_id, {r for c in ckpts if c.checkpoint_id == ckpt_id for r in c.rubric_files})
        )
    return _end(args, ckpts, todo, outcomes, followed, reports, signalled, others, bool(elsewhere))


def _end(
    args: argparse.Namespace,
    ckpts: list[Checkpoint],
    todo: list[Checkpoint],
    outcomes: list[RunOutcome],
    followed: list[RunOutcome],
    reports: list[Verdict],
    signalled: list[bool],
    others: OtherRuns,
    elsewhere: bool,
) -> int:
    """The command's end: what an interruption left, the exit code and the last line."""
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
        else said.exit_code(outcomes + stopped, reports, fail_on_gates=not args.no_fail_on_gates)
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
        print(said.closing_line(code, outcomes, reports), file=sys.stderr if code else sys.stdout, flush=True)
        return code
    if refused and code in (EXIT_OK, EXIT_GATES):  # incomplete data outranks failed gates, as in exit_code
        print(f"eval-pipeline: INCOMPLETE: {refused} rubric file(s) refused (exit 4)", file=sys.stderr, flush=True)
        return EXIT_INCOMPLETE
    print(said.closing_line(code, outcomes, reports), file=sys.stderr if code else sys.stdout, flush=True)
    return code


class OtherRuns:
    """Checkpoints another run was evaluating when the command reached them: the runtime waits for each such run
    (at most ``wait_s``, runtime.command.follow), then the console reports its stored verdicts as its own, with their
    exit code. A run that failed is a failed run (exit 1); a verdict not learnt in time is exit 6
    (``EXIT_NOT_LEARNT``), never 0."""

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
        """``run_id``'s verdicts of ``ckpt_id`` once it settled (the selected rubrics the checkpoint has files of),
        printed as the command prints its own."""
        from eval_pipeline.runtime.command import follow

        head = self.heads.get(ckpt_id, ckpt_id)
        seen = follow(self.instance, run_id, ckpt_id, self.wait_s)
        if seen.state == "in flight":
            self.not_learnt += 1
            print(
                f"{head}: NOT LEARNT: run {run_id} still evaluating it after {self.wait_s:g} s (EVAL_WAIT_FOR_RUN); "
                f"its verdict will be in main.verdicts (exit {EXIT_NOT_LEARNT})",
                flush=True,
            )
            return []
        if seen.state == "failed":
            self.failed += 1
        elif seen.state == "unsettled":
            self.not_learnt += 1
            print(f"{head}: NOT LEARNT: still being decided again after {self.wait_s:g} s (exit 6)", flush=True)
            return []
        names = sorted(n for n in files if n in self.rubrics and (self.selected is None or n in self.selected))
        # the stored verdict once the run and what re-decides after it (the command that launched it, the
        # automation) have ended: the one every reader sees
        ids = None if seen.state == "settled" else [run_id]
        found = [said.decided(self.wh, self.rubrics[n], ckpt_id, ids) for n in names] if self.wh.exists() else []
        word = worst([v.verdict for v in found]).upper() if found else said.UNDECIDED.upper()
        print(f"{head}: {word}: evaluated by run {run_id} ({seen.status})", flush=True)
        for v in found:
            print("\n".join(said.report_lines(v, verbose=self.verbose)), flush=True)
        return found

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


def dagster_log_level(args: argparse.Namespace) -> str:
    """Dagster's own console log: everything with --verbose, its errors and their stacks with --debug, else
    nothing (each failed step is printed here as one line; the whole log stays in the instance)."""
    if args.verbose:
        return "DEBUG"
    return "ERROR" if getattr(args, "debug", False) else "CRITICAL"
