"""An import written as a checkpoint folder, as a harness would have: ``<rubric>.jsonl`` first, ``checkpoint.json``
last, each through a temporary file renamed into place, so the checkpoint sensor never sees half of either (#75).

Every source record ends in the file or in the report, with its line and reason: no response, a field the mapping
names and the record lacks, a duplicate id (the first kept), an error the harness recorded. Ids are the source's
own. Importing the same file again is a no-op; importing other records into a checkpoint that has the rubric's
file is refused unless ``replace``; another rubric's file may be added to an existing checkpoint of the same model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.core.ids import check_checkpoint_id
from eval_pipeline.core.types import JSONObject
from eval_pipeline.ingest.checkpoints import JUDGED, MANIFEST
from eval_pipeline.ingest.importers.base import ImportFailure, Mapping, Record, get

if TYPE_CHECKING:  # the rubric model (pandas) only when an import runs, not for the parser
    from eval_pipeline.core.config import RubricConfig


@dataclass
class Converted:
    """The rubric's input objects of the usable records (in source order), the report of the others (line,
    source, reason), and the imported judge's cells per sample id (``{}`` without a mapping ``judge`` section)."""

    objects: list[JSONObject] = field(default_factory=list)
    report: list[JSONObject] = field(default_factory=list)
    scores: dict[str, JSONObject] = field(default_factory=dict)


def _nested(out: JSONObject, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for part in parts[:-1]:
        out = out.setdefault(part, {})
    out[parts[-1]] = value


def rows(records: Iterable[Record], mapping: Mapping, rubric: RubricConfig) -> Converted:
    """The records converted by the mapping (``Converted``). A judge score the mapping names and a record lacks is
    kept as absent (the score is missing with its reason, the sample is imported)."""
    out = Converted()
    kept, report = out.objects, out.report
    paths = {f.name: f.path or f.name for f in rubric.inputs.fields}
    id_field = rubric.inputs.id_field
    seen: dict[str, int] = {}
    for rec in records:
        where = {"line": rec.line, "source": rec.source}
        if rec.error:
            report.append({**where, "reason": rec.error})
            continue
        try:
            raw_id = get(rec.values, mapping.id)
        except KeyError:
            report.append({**where, "reason": f"no id at {mapping.id!r}"})
            continue
        if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
            report.append({**where, "reason": f"an empty id at {mapping.id!r}"})
            continue
        sid = str(raw_id)
        if sid in seen:
            report.append({**where, "reason": f"duplicate id {sid!r} (the record at line {seen[sid]} kept)"})
            continue
        obj: JSONObject = {}
        _nested(obj, paths.get(id_field, id_field), sid)
        missing = None
        for target, source in mapping.fields.items():
            try:
                _nested(obj, paths[target], get(rec.values, source))
            except KeyError:
                missing = (target, source)
                break
        if missing is not None:
            report.append({**where, "reason": f"no {missing[1]!r} for the field {missing[0]!r}"})
            continue
        seen[sid] = rec.line
        kept.append(obj)
        if mapping.judge is not None:
            out.scores[sid] = {dim: _maybe(rec.values, source) for dim, source in mapping.judge.scores.items()}
    return out


def _maybe(values: JSONObject, dotted: str) -> Any:
    try:
        return get(values, dotted)
    except KeyError:
        return None


def write_checkpoint(
    root: Path,
    checkpoint: str,
    rubric: RubricConfig,
    objects: list[JSONObject],
    model: str,
    parent: str | None = None,
    created_at: str | None = None,
    replace: bool = False,
    judged: JSONObject | None = None,
) -> tuple[Path, bool]:
    """``objects`` as ``<root>/<checkpoint>/<rubric>.jsonl`` and its manifest (see the module's docstring), and
    ``judged`` (an imported judge's scores, ingest.judged) as ``<rubric>.judge.json``; the file's path and whether
    it was already there, byte for byte (nothing written)."""
    check_checkpoint_id(checkpoint)
    if parent is not None:
        check_checkpoint_id(parent)
    folder = root / checkpoint
    target = folder / f"{rubric.name}.jsonl"
    text = "".join(json.dumps(o, ensure_ascii=False, sort_keys=True) + "\n" for o in objects)
    judge_path = folder / f"{rubric.name}{JUDGED}"
    judge_text = json.dumps(judged, ensure_ascii=False, sort_keys=True, indent=1) + "\n" if judged else None
    manifest_path = folder / MANIFEST
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ImportFailure(f"{manifest_path}: cannot be read ({exc}); give another --checkpoint") from None
        same_judge = (judge_path.read_text(encoding="utf-8") if judge_path.exists() else None) == judge_text
        if (
            target.exists()
            and target.read_text(encoding="utf-8") == text
            and manifest.get("model") == model
            and same_judge
        ):
            return target, True
        if not replace and (target.exists() or manifest.get("model") != model):
            what = f"has {target.name}" if target.exists() else f"is of model {manifest.get('model')!r}"
            raise ImportFailure(f"checkpoint {checkpoint} already exists and {what}: give --replace to replace it")
    else:
        manifest = {}
    folder.mkdir(parents=True, exist_ok=True)
    _atomic(target, text)
    if judge_text is not None:
        _atomic(judge_path, judge_text)
    elif judge_path.exists():  # replaced by records no judge scored: the old judge's scores go with them
        judge_path.unlink()
    manifest = {
        **manifest,
        "model": model,
        "created_at": created_at
        or manifest.get("created_at")
        or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "parent": parent if parent is not None else manifest.get("parent"),
    }
    _atomic(manifest_path, json.dumps(manifest, indent=2) + "\n")  # last: the folder is complete
    return target, False


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
