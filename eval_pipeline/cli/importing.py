"""`eval-pipeline import FORMAT PATH`: outputs a harness already wrote, as a checkpoint folder the checkpoint sensor
evaluates (ingest.importers)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eval_pipeline.cli.common import CliError, Parents, Subcommands


def add_parsers(sub: Subcommands, parents: Parents) -> None:
    from eval_pipeline.ingest.importers import IMPORTERS

    formats = IMPORTERS.load()
    listing = "; ".join(f"{name}: {formats[name].help}" for name in sorted(formats))
    im = parents.command(
        sub,
        cmd_import,
        help="write outputs a harness already has as a checkpoint folder (formats: " + ", ".join(sorted(formats)) + ")",
        description=f"Formats — {listing}. The mapping file (YAML: rubric, id, fields) says which source path becomes "
        "which rubric input field; docs/operating.md has one worked example per format.",
    )
    im.add_argument("format", choices=sorted(formats), help="the source's format")
    im.add_argument("path", help="the source file (for openai-batch: the requests' input file)")
    im.add_argument("--checkpoint", required=True, help="the checkpoint id to write")
    im.add_argument("--map", required=True, help="the mapping file (YAML): rubric, id, fields")
    im.add_argument("--rubric", help="the rubric (default: the mapping's)")
    im.add_argument("--output", help="openai-batch: the Batch API output file")
    im.add_argument("--model", help="the model that generated the outputs (default: what the source records)")
    im.add_argument("--parent", help="the checkpoint this one is compared with")
    im.add_argument("--created-at", help="when the checkpoint was made (ISO 8601; default: now)")
    im.add_argument("--replace", action="store_true", help="replace the rubric's file of an existing checkpoint")
    im.add_argument("--report", help="where the records left out are listed (default: ./import-report-<C>-<R>.jsonl)")


def cmd_import(args: argparse.Namespace) -> int:
    from eval_pipeline.core import settings
    from eval_pipeline.ingest.checkpoints import CheckpointError, normalise_created_at
    from eval_pipeline.ingest.importers import ImportFailure, Request, import_file
    from eval_pipeline.rubrics import load_rubrics

    try:
        request = Request(
            args.format,
            Path(args.path),
            Path(args.map),
            args.checkpoint,
            Path(args.output) if args.output else None,
            args.rubric,
            args.model,
            args.parent,
            normalise_created_at(args.created_at, "--created-at") if args.created_at else None,
            args.replace,
        )
        out = import_file(request, {r.name: r for r in load_rubrics()}, settings.checkpoint_dir())
    except (ImportFailure, CheckpointError) as exc:
        raise CliError(str(exc)) from None
    where = Path(args.report or f"import-report-{args.checkpoint}-{out.rubric}.jsonl")
    if out.left_out:
        where.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out.left_out), encoding="utf-8")
    done = "unchanged (the same records are already there)" if out.unchanged else f"wrote {out.path}"
    print(f"{out.imported} sample(s) of {request.source.name} for {out.rubric}, model {out.model}: {done}")
    if out.judged:
        print(f"with the scores of the judge {out.judged}: EVAL_JUDGE=imported judges from them")
    if out.left_out:
        print(f"{len(out.left_out)} record(s) left out, each with its line and reason: {where}")
        for r in out.left_out[:3]:
            print(f"  {r['source']} line {r['line']}: {r['reason']}")
    return 0
