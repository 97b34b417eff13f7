"""The verdicts as the console says them: each rubric's verdict and what decided it, what each means and what to
do next, the line of a checkpoint, the exit code and the command's last line (the codes: the package's docstring)."""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

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
from eval_pipeline.scoring.verdict import VERDICTS, Verdict, worst
from eval_pipeline.scoring.verdict import read as read_verdicts
from eval_pipeline.storage.warehouse import Warehouse

if TYPE_CHECKING:
    from collections.abc import Mapping

    from eval_pipeline.runtime.outcome import RunOutcome

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


def closing_line(code: int, outcomes: list[RunOutcome], reports: list[Verdict]) -> str:
    """The command's last line: what its exit code means, with the counts behind it."""
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
