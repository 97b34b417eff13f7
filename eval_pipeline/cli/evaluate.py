"""`run`, `checkpoints`, `backfill`: evaluating checkpoints and listing them."""

from __future__ import annotations

import argparse

from eval_pipeline.cli.common import (
    CliError,
    Parents,
    Subcommands,
    dagster_instance,
    rubrics_and_defs,
    scan_checkpoint_folders,
    select_checkpoints,
    with_skipped,
)
from eval_pipeline.core.terminal import (
    clean,
)


def cmd_run(args: argparse.Namespace) -> int:
    """Register and evaluate checkpoints (in-process; on the deployment's workers when EVAL_DAGSTER_URL is set)."""
    defs, rubrics = rubrics_and_defs(args)
    scan = scan_checkpoint_folders()
    ckpts = select_checkpoints(scan, args.checkpoint)
    if not ckpts:
        why = ""
        if scan.refused:
            more = f" (and {len(scan.refused) - 1} more)" if len(scan.refused) > 1 else ""
            why = f"; refused: {scan.refused[0]}{more}"
        raise CliError("no complete checkpoint folders found" + why)
    from eval_pipeline.console import evaluate

    return with_skipped(args, evaluate(args, ckpts, defs, rubrics, dagster_instance()))


def cmd_checkpoints(args: argparse.Namespace) -> int:
    """List checkpoint folders with their status."""
    from eval_pipeline.console import shorten
    from eval_pipeline.defs.partitions import CHECKPOINTS
    from eval_pipeline.storage.warehouse import Warehouse

    scan = scan_checkpoint_folders()
    registered = set(dagster_instance().get_dynamic_partitions(CHECKPOINTS.name))
    status: dict[str, str] = {}
    wh = Warehouse()
    if wh.exists() and wh.table_exists("main", "checkpoints"):
        from eval_pipeline.publish.overview import overview

        for row in overview(wh).checkpoints:  # the stored verdicts, the worst of the checkpoint's rubrics
            status[row["checkpoint_id"]] = row["verdict"]
    print(f"{'checkpoint':<16} {'model':<18} {'created':<22} {'parent':<12} {'verdict':<16} {'rubrics'}")
    for c in sorted(scan.complete, key=lambda c: (c.created_at, c.checkpoint_id)):
        shown = status.get(c.checkpoint_id) or ("registered" if c.checkpoint_id in registered else "new")
        print(
            clean(
                f"{c.checkpoint_id:<16} {shorten(c.model, 60):<18} {c.created_at:<22} {c.parent or '-':<12} "
                f"{shown:<16} "
                f"{', '.join(sorted(c.rubric_files))}"
            )
        )
    for name in scan.incomplete:
        print(clean(f"{name:<16} (still being written: no checkpoint.json)"))
    for reason in scan.refused:
        print(clean(f"refused: {reason}"))
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    """Evaluate all checkpoints (or a range, by creation order)."""
    defs, rubrics = rubrics_and_defs(args)
    ckpts = select_checkpoints(scan_checkpoint_folders(), None)
    ids = [c.checkpoint_id for c in ckpts]
    for name in (args.start, args.end):
        if name and name not in ids:
            raise CliError(f"unknown checkpoint {name!r} (see 'eval-pipeline checkpoints')")
    lo = ids.index(args.start) if args.start else 0
    hi = ids.index(args.end) + 1 if args.end else len(ids)
    if hi <= lo:
        raise CliError(f"--from {args.start} comes after --to {args.end} in creation order ({' -> '.join(ids)})")
    from eval_pipeline.console import evaluate

    return with_skipped(args, evaluate(args, ckpts[lo:hi], defs, rubrics, dagster_instance()))


def add_parsers(sub: Subcommands, parents: Parents) -> None:
    """This module's commands, on the command's parser."""
    run = parents.command(sub, cmd_run, evaluates=True)
    run.add_argument("--checkpoint", action="append", help="checkpoint id (repeatable; default: all)")
    run.add_argument(
        "--wait",
        action="store_true",
        help="with EVAL_JUDGE_MODE=batch: wait for the judge batches and finish their checkpoints (default: submit, "
        "report them pending, exit 7; the batch sensor finishes them)",
    )
    parents.command(sub, cmd_checkpoints)
    bf = parents.command(sub, cmd_backfill, evaluates=True)
    bf.add_argument("--from", dest="start", help="the first checkpoint id to evaluate (by creation order)")
    bf.add_argument("--to", dest="end", help="the last checkpoint id to evaluate (by creation order)")
