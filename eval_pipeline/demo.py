"""``make demo``: materialize every rubric group for every sample checkpoint, then print results.

Runs in-process against the Dagster instance in DAGSTER_HOME (the Makefile points
it at ``.dagster_home/`` so ``make ui`` shows the runs afterwards), or against an
ephemeral instance when DAGSTER_HOME is unset.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.console import Progress, checkpoint_line, decided, exit_code, report_lines, shorten, what_next
from eval_pipeline.core import progress, settings
from eval_pipeline.core.terminal import exit_now
from eval_pipeline.defs.build import build_definitions
from eval_pipeline.ingest.checkpoints import scan_checkpoints
from eval_pipeline.publish.report_table import results_table
from eval_pipeline.rubrics import load_rubrics
from eval_pipeline.runtime.instance import open_instance
from eval_pipeline.runtime.outcome import RunOutcome
from eval_pipeline.runtime.runner import Settled, evaluation_events
from eval_pipeline.scoring.verdict import Verdict
from eval_pipeline.storage.warehouse import Warehouse


def get_instance() -> dg.DagsterInstance:
    """The instance in DAGSTER_HOME, given the project's instance (`deploy/dagster.yaml` fitted to the warehouse,
    as `make dagster-home` writes it) when it has none yet: written here, not by a process of its own, which
    would import Dagster again to write a file. Ephemeral without DAGSTER_HOME."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        return dg.DagsterInstance.ephemeral()
    instance: dg.DagsterInstance = open_instance(Path(home))
    return instance


def judge_line(instance: dg.DagsterInstance, outcomes: list[RunOutcome]) -> str:
    """The judge's work over the runs, from their judge_scores materializations: prompts, calls, cache hits, time."""
    calls = hits = prompts = tokens_in = tokens_out = 0
    wall = 0.0
    for run_id in (r for o in outcomes for r in o.run_ids):
        for ev in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            dev = ev.dagster_event
            if dev is None or not dev.is_step_materialization:
                continue
            mat = dev.step_materialization_data.materialization
            if mat.asset_key.path[-1] != "judge_scores":
                continue
            md: dict[str, Any] = {k: v.value for k, v in mat.metadata.items()}
            calls += md.get("calls", 0)
            hits += md.get("cache_hits", 0)
            prompts += md.get("prompts", 0)
            tokens_in += md.get("prompt_tokens", 0)
            tokens_out += md.get("completion_tokens", 0)
            wall += md.get("judge_wall_s", 0.0)
    return (
        f"judge: {settings.judge_config().mode}, {prompts} prompts, {calls} calls, {hits} cache hits, "
        f"{tokens_in:,} prompt + {tokens_out:,} completion tokens, judge wall time {wall:.2f}s"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", action="append", help="checkpoint id (default: every complete checkpoint)")
    ap.add_argument("--rubric", action="append", help="rubric name (default: every rubric)")
    ap.add_argument("--log-level", default="WARNING", help="Dagster's console log level (the instance keeps all)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    defs = build_definitions()
    instance = get_instance()
    scan = scan_checkpoints()
    ids = args.checkpoint or [c.checkpoint_id for c in scan.complete]
    if not ids:
        print("no complete checkpoint folders found under data/checkpoints", file=sys.stderr)
        return 1
    rubrics = {r.name: r for r in load_rubrics()}
    unknown = sorted(set(args.rubric or []) - set(rubrics))
    if unknown:
        print(f"no rubric named {', '.join(unknown)} (there are: {', '.join(sorted(rubrics))})", file=sys.stderr)
        return 2
    wh = Warehouse()
    reports: list[Verdict] = []

    def summary(o: RunOutcome) -> None:  # after each checkpoint, as it finishes
        bar.clear()
        with wh.hold():  # one opening of the file for the checkpoint's rubrics, not one each
            mine = [decided(wh, rubrics[name], o.checkpoint_id, o.run_ids, o.success) for name in o.rubrics]
        reports.extend(mine)
        print(checkpoint_line(o.checkpoint_id, o, mine))
        for failure in o.failures:
            print(f"    step FAILED {shorten(failure, 300, keep_end=True)}")
        for r in mine:
            print("\n".join(report_lines(r)), flush=True)

    bar = Progress()
    with wh.lingering():  # the file open from the first run to the table of results, as within a run
        with progress.listening(bar):
            selected = set(args.rubric) if args.rubric else None
            outcomes = []
            for event in evaluation_events(defs, instance, ids, selected, log_level=args.log_level):
                if isinstance(event, Settled):
                    outcomes.append(event.outcome)
                    summary(event.outcome)
        print(judge_line(instance, outcomes))
        print()
        with wh.hold():
            print(results_table(wh))
    print("\n" + "\n".join(what_next(reports)))
    if settings.judge_config().mode == "heuristic":
        print(
            "  The demo's judge is the offline heuristic judge (rules, not an LLM): its trust is decided as any "
            "judge's is, so its red says how far rules get, not a fault of the demo. The sample data shows each "
            "kind of verdict: ckpt-0300 regresses on purpose, and on ckpt-0200 one rubric passes and one waits "
            "for ratings. A real judge: EVAL_JUDGE=openai with OPENAI_BASE_URL (docs/operating.md), or "
            "`make demo-llm`."
        )
    drawn = [o for o in outcomes if o.report is not None]
    print(f"\nreport: {drawn[-1].report}" if drawn else "\nreport: not written (see the line above)")
    print("browse sample by sample: make view (or .venv/bin/eval-pipeline view), then http://127.0.0.1:8765/")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\ndemo wall time {time.perf_counter() - t0:.1f}s, peak RSS {peak_mb:.0f} MB, warehouse {wh.path}")
    # the sample data regresses on purpose (ckpt-0300) and the offline judge does not earn trust: failed gates
    # are shown above, not an error of the demo; a failed run or incomplete data is
    code = exit_code(outcomes, reports, fail_on_gates=False)
    if code:
        print(f"demo: exit {code} (see the FAILED / INCOMPLETE lines above)", file=sys.stderr)
    instance.dispose()  # the event databases closed: their write-ahead logs go into the files
    return code


if __name__ == "__main__":
    exit_now(main())
