"""`eval-pipeline align`: align a rubric's judge to people's ratings (the group's ``judge_alignment`` asset,
launched through Dagster as the UI launches it), list or show alignments, and adopt one (writes
``<rubric dir>/aligned/<rubric>.yaml`` for a person to review; nothing switches judges by itself)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from eval_pipeline.cli.common import CliError, Parents, Subcommands, dagster_instance, rubrics_and_defs

ALIGN_EXIT_CODES = """exit codes:
  0    the alignment finished (recommended or not: the report says which), or the list, show or adopt done
  1    the alignment's run failed (its error is printed)
  2    a usage or configuration error (an unknown rubric or dimension, an alignment that recommends nothing)
  4    not enough ratings to align (rate more first)
  130  interrupted (Ctrl-C)
"""
NOT_ENOUGH = "not enough ratings to align"  # how the asset's failure begins when the ratings are too few


def cmd_align(args: argparse.Namespace) -> int:
    """Align a rubric's judge to people's ratings (a held-out share decides), list, show or adopt alignments."""
    from eval_pipeline.storage.warehouse import Warehouse

    if args.adopt or args.show or args.list:
        wh = Warehouse(None, read_only=True, lock_timeout_s=3)
        try:
            if args.list:
                return _list(wh, args.rubric)
            view = _view(wh, args.rubric, args.show or args.adopt)
        finally:
            wh.close()
        return _adopt(view) if args.adopt else _print(view)
    return _run(args)


def _view(wh: Any, rubric: str, wanted: str) -> Any:
    from eval_pipeline.publish.alignment import alignment_view

    view = alignment_view(wh, rubric, wanted)
    if view is None:
        raise CliError(f"no alignment {wanted!r} of {rubric} (`eval-pipeline align --rubric {rubric} --list`)")
    return view


def _list(wh: Any, rubric: str) -> int:
    from eval_pipeline.publish.alignment import alignment_ids

    found = alignment_ids(wh, rubric)
    if not found:
        print(f"no alignment of {rubric} yet: `eval-pipeline align --rubric {rubric}` runs one", flush=True)
        return 0
    adopted = _adopted(rubric)
    rows = [
        (
            str(r["alignment_id"]),
            str(r["created_at"])[:19],
            str(r["dimensions"]),
            ("ADOPTED (the judge now) " if str(r["alignment_id"]) == adopted else "")
            + ("recommended" if r["recommended"] else "nothing to adopt"),
        )
        for r in found
    ]
    head = ("alignment", "made", "dimensions", "")
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(3)]
    for cells in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + cells[3], flush=True)
    if adopted and adopted not in {x[0] for x in rows}:
        print(f"(the judge now is alignment {adopted}, adopted from another warehouse)", flush=True)
    return 0


def _adopted(rubric: str) -> str | None:
    """The id of the alignment the rubric's judge now comes from (its overlay file, aligned/<rubric>.yaml), if
    any; None for a rubric that does not load (its run says why)."""
    from eval_pipeline.core import settings
    from eval_pipeline.rubrics import load_rubric, rubric_file

    path = rubric_file(settings.rubric_dir(), rubric)
    try:
        aligned = load_rubric(path).aligned if path is not None else None
    except Exception:  # noqa: BLE001 - a rubric that does not load: nothing to mark
        return None
    return aligned.id if aligned is not None else None


def _print(view: Any) -> int:
    from eval_pipeline.core.terminal import clean
    from eval_pipeline.publish.alignment import report_lines

    for line in report_lines(view):
        print(clean(line), flush=True)
    return 0


def _run(args: argparse.Namespace) -> int:
    import dagster as dg

    from eval_pipeline.runtime.runs import step_failures

    args.rubric = [args.rubric]
    defs, rubrics = rubrics_and_defs(args)
    name = args.rubric[0]
    rubric = rubrics.get(name)
    if rubric is None:
        raise CliError(f"unknown rubric {name!r} (known: {', '.join(sorted(rubrics))})")
    unknown = [d for d in args.dimension or [] if d not in rubric.rating_scales]
    if unknown:
        raise CliError(f"{name} rates no dimension {unknown[0]!r} (rated: {', '.join(rubric.rating_scales)})")
    config: dict[str, Any] = {"dimensions": list(args.dimension or [])}
    for key in ("max_candidates", "max_calls", "max_cost"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    job = defs.resolve_job_def(f"{name}_align")
    instance = dagster_instance()
    op = f"{name}__judge_alignment"
    result = job.execute_in_process(
        instance=instance,
        run_config={"ops": {op: {"config": config}}, "loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        raise_on_error=False,
        tags={"eval/rubrics": name, "eval/command": "align"},
    )
    if not result.success:
        failures = step_failures(instance, result.run_id) or [f"run {result.run_id[:8]} failed"]
        why = failures[0].split(": ", 1)[-1]
        if why.startswith(NOT_ENOUGH):
            print(f"error: {why}", flush=True)
            return 4
        raise CliError(failures[0])
    aid = next(
        str(e.event_specific_data.materialization.metadata["alignment_id"].value)  # type: ignore[union-attr]
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    from eval_pipeline.storage.warehouse import Warehouse

    wh = Warehouse(None, read_only=True, lock_timeout_s=30)
    try:
        return _print(_view(wh, name, aid))
    finally:
        wh.close()


def _adopt(view: Any) -> int:
    import yaml

    from eval_pipeline.core import settings
    from eval_pipeline.core.config.alignment import overlay_path
    from eval_pipeline.rubrics import load_rubric, rubric_file

    over = view.overlay
    if not view.recommended or not over:
        raise CliError(f"alignment {view.id} recommends nothing ({view.chosen['verdict']}): there is nothing to adopt")
    folder = settings.rubric_dir()
    path = rubric_file(folder, view.rubric)
    if path is None:
        raise CliError(f"no rubric file for {view.rubric!r} in {folder}")
    current = load_rubric(path)
    if current.judge_version != over["aligned"]["from_prompt_version"]:
        raise CliError(
            f"{view.rubric}'s judge changed since alignment {view.id} was made (prompt version "
            f"{current.judge_version[:8]}, aligned from {str(over['aligned']['from_prompt_version'])[:8]}): align again"
        )
    target = overlay_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    replaced = target.exists()
    header = (
        f"# The judge of {view.rubric}, aligned to people's ratings by alignment {view.id} "
        f"(`eval-pipeline align --rubric {view.rubric} --show {view.id}`).\n"
        "# Laid over the rubric's own file when it loads: review it, commit it, or delete it to return to the old "
        "judge.\n# aligned.tuned_on: the rated samples it was tuned on or shown; never part of its calibration set.\n"
    )
    tmp = target.with_suffix(".tmp")
    tmp.write_text(header + yaml.safe_dump(over, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8")
    tmp.replace(target)
    load_rubric(path)  # the overlay loads: the rubric as it will be read
    print(f"{'replaced' if replaced else 'wrote'} {_shown(target)}: {view.chosen['label']}", flush=True)
    print(
        f"the judge is a new judge identity: its trust is decided on the {view.chosen['n_heldout']} held-out ratings "
        f"and ratings that arrive later; re-judge with `eval-pipeline run --rubric {view.rubric}`",
        flush=True,
    )
    return 0


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def add_parsers(sub: Subcommands, parents: Parents) -> None:
    """This module's commands, on the command's parser."""
    al = parents.command(
        sub,
        cmd_align,
        description="Align a rubric's judge to the people's ratings: candidate judges (instructions, few-shot "
        "examples, score source) are tuned by cross-validation on part of the ratings, and the best is proved on "
        "held-out ratings it never saw; it is recommended only when its gain there is beyond noise. Adopting one "
        "makes it a new judge, whose trust is decided afresh on the held-out ratings and those that come.",
        epilog=ALIGN_EXIT_CODES,
    )
    al.add_argument("--rubric", required=True, help="the rubric whose judge is aligned")
    al.add_argument("--dimension", action="append", help="a rated dimension to align on (repeatable; default: all)")
    al.add_argument("--max-candidates", type=int, help="candidates tried at most (default: the rubric's align:)")
    al.add_argument("--max-calls", type=int, help="judge calls at most, cache hits free (default: the rubric's)")
    al.add_argument("--max-cost", type=float, help="money at most, in the price table's currency")
    al.add_argument("--list", action="store_true", help="list the rubric's alignments")
    al.add_argument("--show", metavar="ID", help="print an alignment's report")
    al.add_argument("--adopt", metavar="ID", help="write a recommended alignment's judge to aligned/<rubric>.yaml")
