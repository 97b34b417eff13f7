"""One import from start to end, as the command and the import sensor run it: the source read by its format, the
records converted by the mapping, the checkpoint folder written (``write``), the outcome to report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.core.types import JSONObject
from eval_pipeline.ingest.importers.base import IMPORTERS, ImportFailure, Mapping
from eval_pipeline.ingest.importers.write import rows, write_checkpoint

if TYPE_CHECKING:  # the rubric model (pandas) only when an import runs, not for the parser
    from eval_pipeline.core.config import RubricConfig


@dataclass(frozen=True)
class Request:
    format: str
    source: Path
    mapping: Path
    checkpoint: str
    extra: Path | None = None  # the format's second file (openai-batch: the output file)
    rubric: str | None = None  # overrides the mapping's
    model: str | None = None  # overrides what the source records
    parent: str | None = None
    created_at: str | None = None  # normalised ISO 8601 (ingest.checkpoints.normalise_created_at)
    replace: bool = False


@dataclass
class Outcome:
    path: Path
    rubric: str
    model: str
    imported: int
    unchanged: bool
    left_out: list[JSONObject] = field(default_factory=list)  # line, source, reason
    judged: str | None = None  # who judged, when the mapping brings a judge's scores


def import_file(request: Request, rubrics: dict[str, RubricConfig], root: Path) -> Outcome:
    """``request``'s source written as ``<root>/<checkpoint>/`` (ImportFailure, one line, when it cannot be)."""
    fmt = IMPORTERS.load().get_unit(request.format)
    if fmt.needs_extra and request.extra is None:
        raise ImportFailure(f"{fmt.name} needs its {fmt.needs_extra} file too: --output FILE")
    for path in (request.source, request.extra):
        if path is not None and not path.is_file():
            raise ImportFailure(f"{path}: no such file")
    mapping, rubric = Mapping.load(request.mapping, rubrics, request.rubric)
    records = list(fmt.read(request.source, request.extra))
    model = request.model or fmt.model(request.source, records)
    if not model:
        raise ImportFailure(f"{request.source}: the {fmt.name} file does not say which model wrote it: give --model")
    converted = rows(records, mapping, rubric)
    report = converted.report
    if not converted.objects:
        first = f" (line {report[0]['line']}: {report[0]['reason']})" if report else ""
        raise ImportFailure(f"{request.source}: nothing to import: {len(report)} record(s), all left out{first}")
    judge = mapping.judge
    judged = (
        None
        if judge is None
        else {"model": judge.model, "prompt": judge.prompt, "date": judge.date, "scores": converted.scores}
    )
    target, unchanged = write_checkpoint(
        root,
        request.checkpoint,
        rubric,
        converted.objects,
        model,
        request.parent,
        request.created_at,
        request.replace,
        judged,
    )
    who = None if judge is None else f"{judge.model} (prompt {judge.prompt})"
    return Outcome(target, rubric.name, model, len(converted.objects), unchanged, report, who)
