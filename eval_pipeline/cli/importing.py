"""`eval-pipeline import FORMAT PATH`: outputs a harness already wrote, as a checkpoint folder the checkpoint sensor
evaluates (ingest.importers)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eval_pipeline.cli.common import CliError


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    from eval_pipeline.ingest.importers import IMPORTERS

    formats = IMPORTERS.load()
    listing = "; ".join(f"{name}: {formats[name].help}" for name in sorted(formats))
    im = sub.add_parser(
        "import",
        help="write outputs a harness already has as a checkpoint folder (formats: " + ", ".join(sorted(formats)) + ")",
        description=f"Formats — {listing}. The mapping file (YAML: rubric, id, fields) says which source path becomes "
        "which rubric input field; docs/operating.md has one worked example per format.",
        parents=[common],
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
    im.set_defaults(fn=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    from eval_pipeline.core import settings
    from eval_pipeline.ingest.checkpoints import CheckpointError, normalise_created_at
    from eval_pipeline.ingest.importers import IMPORTERS, ImportFailure, Mapping, rows, write_checkpoint
    from eval_pipeline.rubrics import load_rubrics

    fmt = IMPORTERS.load().get_unit(args.format)
    source = Path(args.path)
    extra = Path(args.output) if args.output else None
    try:
        if fmt.needs_extra and extra is None:
            raise ImportFailure(f"{fmt.name} needs its {fmt.needs_extra} file too: --output FILE")
        for path in (source, extra):
            if path is not None and not path.is_file():
                raise ImportFailure(f"{path}: no such file")
        mapping, rubric = Mapping.load(Path(args.map), {r.name: r for r in load_rubrics()}, args.rubric)
        created = normalise_created_at(args.created_at, "--created-at") if args.created_at else None
        model = args.model or fmt.model(source)
        if not model:
            raise ImportFailure(f"{source}: the {fmt.name} file does not say which model wrote it: give --model")
        kept, report = rows(fmt.read(source, extra), mapping, rubric)
        if not kept:
            first = f" (line {report[0]['line']}: {report[0]['reason']})" if report else ""
            raise ImportFailure(f"{source}: nothing to import: {len(report)} record(s), all left out{first}")
        target, unchanged = write_checkpoint(
            settings.checkpoint_dir(), args.checkpoint, rubric, kept, model, args.parent, created, args.replace
        )
    except (ImportFailure, CheckpointError) as exc:
        raise CliError(str(exc)) from None
    where = Path(args.report or f"import-report-{args.checkpoint}-{rubric.name}.jsonl")
    if report:
        where.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in report), encoding="utf-8")
    done = "unchanged (the same records are already there)" if unchanged else f"wrote {target}"
    print(f"{len(kept)} sample(s) of {source.name} for {rubric.name}, model {model}: {done}")
    if report:
        print(f"{len(report)} record(s) left out, each with its line and reason: {where}")
        for r in report[:3]:
            print(f"  {r['source']} line {r['line']}: {r['reason']}")
    return 0
