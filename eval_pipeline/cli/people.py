"""`report`, `reference`, `view`, `annotate`, `ratings-template`: what people read and rate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eval_pipeline.cli.common import (
    CliError,
    Parents,
    Subcommands,
    port_free,
    rubrics_and_defs,
    scan_checkpoint_folders,
)


def cmd_ratings_template(args: argparse.Namespace) -> int:
    """Write a ratings CSV for a checkpoint, one row per sample.

    Ready to fill: the columns the loader reads, one row per sample id of the checkpoint."""
    import csv

    from eval_pipeline.rubrics import load_rubrics

    rubrics = {r.name: r for r in load_rubrics()}
    rubric = rubrics.get(args.rubric)
    if rubric is None:
        raise CliError(f"unknown rubric {args.rubric!r}; known: {', '.join(sorted(rubrics))}")
    ckpt = {c.checkpoint_id: c for c in scan_checkpoint_folders().complete}.get(args.checkpoint)
    if ckpt is None:
        raise CliError(f"no complete checkpoint folder for {args.checkpoint!r} (see 'eval-pipeline checkpoints')")
    path = ckpt.file_for(rubric.name)
    if path is None:
        raise CliError(f"checkpoint {args.checkpoint} has no {rubric.name}.jsonl")
    from eval_pipeline.ingest.validation import validate_file

    # the valid samples only, validated as the pipeline does (ratings of others are refused)
    samples = validate_file(rubric, path, ckpt.checkpoint_id).samples
    ids: list[str] = samples[rubric.inputs.id_field].tolist()
    # what a rater reads, after the columns they fill: the worklist's sheet fields, the other inputs and the
    # response, prefixed read_ (the loader leaves them alone), formula-like text neutralised
    inputs = [
        f.name for f in rubric.inputs.fields if f.name not in (rubric.inputs.id_field, rubric.inputs.response_field)
    ]
    shown = list(dict.fromkeys([*rubric.worklists.sheet_fields, *inputs, rubric.inputs.response_field]))
    shown = [c for c in shown if c in samples.columns]
    from eval_pipeline.core import settings
    from eval_pipeline.core.ids import UnsafeIdentifierError, check_evaluator

    try:
        check_evaluator(args.evaluator)
    except UnsafeIdentifierError as exc:
        raise CliError(str(exc)) from None
    # by default where the pipeline reads ratings, so a filled-in file counts at the next run without a move; with
    # the ratings in a store (s3://), in the working folder: this machine's copy of the store is not the store
    name = f"{ckpt.checkpoint_id}~{args.evaluator}.csv"  # the name annotate gives the same pair (store.SEPARATOR)
    remote = settings.is_remote(settings.ratings_location())
    out = Path(args.out or (Path(name) if remote else settings.ratings_dir() / rubric.name / name))
    if out.exists():
        raise CliError(f"{out} exists (ratings are never overwritten): fill that one in, or give --out")
    from eval_pipeline.core.text import csv_cell

    header = ["sample_id", "evaluator", "rater_kind", "checkpoint", *rubric.rating_scales, "notes"]
    header += [f"read_{c}" for c in shown]
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for sid, row in zip(ids, samples[shown].to_dict("records")):
            context = [csv_cell(row[c] if isinstance(row[c], str) else str(row[c])) for c in shown]
            blank = [""] * len(rubric.rating_scales)
            w.writerow([sid, args.evaluator, "human", ckpt.checkpoint_id, *blank, "", *context])
    scales = ", ".join(f"{k} {s.min}-{s.max}" for k, s in rubric.rating_scales.items())
    print(
        f"wrote {out}: {len(ids)} samples; fill one score per column ({scales}); a row left empty is reported as "
        f"not rated yet. The pipeline reads {settings.ratings_location()}/{rubric.name}/*.csv at the next run"
        + (
            "; put the file there"
            if remote or out.parent.resolve() != (settings.ratings_dir() / rubric.name).resolve()
            else ""
        )
    )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Write a static HTML report (one file, offline)."""
    from eval_pipeline.publish.report import write_report
    from eval_pipeline.storage.warehouse import Warehouse

    wh = Warehouse(args.warehouse)
    if not wh.exists():
        raise CliError(f"warehouse {wh.describe()} does not exist yet: run 'eval-pipeline run' first")
    path = write_report(wh, args.out)
    print(f"report written to {path}")
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    """Write the rubric YAML reference (from the code)."""
    from pathlib import Path

    from eval_pipeline.publish.reference import reference

    text = reference()
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"rubric YAML reference written to {args.out}")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    """A local results viewer: leaderboard, checkpoints, samples (reads the warehouse live)."""
    from eval_pipeline.publish.viewer.app import serve
    from eval_pipeline.storage.warehouse import Warehouse

    # read-only (a missing warehouse is never created, a plain reader of a DuckDB file never waited on) and a short
    # lock wait: a page says the file is busy in seconds rather than failing after the writer's two minutes
    wh = Warehouse(args.warehouse, read_only=True, lock_timeout_s=3)
    port_free(args.host, args.port)
    print(f"eval-pipeline view: http://{args.host}:{args.port}/ on {wh.describe()} (Ctrl-C stops it)")
    serve(wh, args.host, args.port)
    return 0


def cmd_annotate(args: argparse.Namespace) -> int:
    """People rate samples in the browser by the rubric's protocol (pilot, calibration, remainder, spot check).

    Ratings are written where the pipeline reads them."""
    import os

    from eval_pipeline.core import settings
    from eval_pipeline.publish.annotate.app import serve
    from eval_pipeline.publish.annotate.guard import AnnotateRefused, check_binding
    from eval_pipeline.storage.warehouse import Warehouse

    token = os.environ.get("EVAL_ANNOTATE_TOKEN", "").strip() or None
    try:
        check_binding(args.host, token)
    except AnnotateRefused as exc:
        raise CliError(str(exc)) from None
    _, rubrics = rubrics_and_defs(argparse.Namespace(rubric=None))
    if settings.is_remote(settings.ratings_location()):
        raise CliError(
            f"annotate writes ratings files into a folder, and EVAL_RATINGS_DIR is {settings.ratings_location()}: "
            "run it with EVAL_RATINGS_DIR set to a folder, then copy that folder's files into the store"
        )
    wh = Warehouse(args.warehouse, read_only=True, lock_timeout_s=3)
    root = settings.ratings_dir()
    port_free(args.host, args.port)
    print(
        f"eval-pipeline annotate: http://{args.host}:{args.port}/ · ratings into {root} · on {wh.describe()} "
        "(Ctrl-C stops it)"
    )
    serve(wh, rubrics, root, args.host, args.port, token)
    return 0


def add_parsers(sub: Subcommands, parents: Parents) -> None:
    """This module's commands, on the command's parser."""
    tp = parents.command(sub, cmd_ratings_template)
    tp.add_argument("--rubric", required=True, help="the rubric whose dimensions the template asks for")
    tp.add_argument("--checkpoint", required=True, help="the checkpoint whose samples are listed to rate")
    tp.add_argument("--evaluator", required=True, help="who rates: fills the evaluator column and names the file")
    tp.add_argument(
        "--out", help="file to write (default: <ratings dir>/<rubric>/<checkpoint>~<evaluator>.csv, where it is read)"
    )
    vw = parents.command(sub, cmd_view, reads=True)
    vw.add_argument("--port", type=int, default=8765, help="the port to serve on (default 8765)")
    vw.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1: this machine only)")
    an = parents.command(sub, cmd_annotate, reads=True)
    an.add_argument("--port", type=int, default=8766, help="the port to serve on (default 8766)")
    an.add_argument("--host", default="127.0.0.1", help="past 127.0.0.1 it needs EVAL_ANNOTATE_TOKEN")
    rp = parents.command(sub, cmd_report, reads=True)
    rp.add_argument("--out", default="reports", help="the folder report.html is written to (default reports/)")
    rf = parents.command(sub, cmd_reference)
    rf.add_argument("--out", default="docs/rubric-reference.md", help="a file, or - for standard output")
