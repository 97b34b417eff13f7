"""Checkpoint folders: ``data/checkpoints/<checkpoint_id>/``.

A folder holds one ``<rubric>.jsonl`` per rubric the checkpoint was evaluated on
and, written last, ``checkpoint.json`` (model name, created time, optional parent
checkpoint). A folder without ``checkpoint.json`` is still being written and is
ignored. Ids are validated before they reach a path or SQL.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from eval_pipeline.core import settings
from eval_pipeline.core.ids import UnsafeIdentifierError, check_checkpoint_id
from eval_pipeline.core.types import JSONObject
from eval_pipeline.ingest.files import not_a_file

MANIFEST = "checkpoint.json"
JUDGED = ".judge.json"  # <rubric>.judge.json: scores of a judge the team already ran (ingest.judged)


class CheckpointError(ValueError):
    """A checkpoint folder that cannot be used (bad id or manifest)."""


@dataclass(frozen=True)
class Checkpoint:
    checkpoint_id: str
    path: Path
    model: str
    created_at: str
    parent: str | None
    rubric_files: dict[str, Path] = field(default_factory=dict)
    # <rubric>.jsonl names in the folder that cannot be read as one, with why (a directory, a FIFO, a link out)
    refused_files: dict[str, str] = field(default_factory=dict)

    def file_for(self, rubric: str) -> Path | None:
        return self.rubric_files.get(rubric)

    def judged_for(self, rubric: str) -> Path | None:
        """The imported judge's scores for ``rubric`` (``<rubric>.judge.json``, a regular file), if any."""
        path = self.path / f"{rubric}{JUDGED}"
        return path if path.is_file() and not path.is_symlink() else None


MAX_MANIFEST_BYTES = 1 << 20
ISO_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?(?:Z|z|[+-]\d{2}:?\d{2})?")


def normalise_created_at(value: object, where: str) -> str:
    """An ISO-8601 date or date-time, with its zone (none: UTC), as UTC text to the second
    (``2026-09-01T04:00:00Z``), so text order is time order everywhere it is compared."""
    if not isinstance(value, str) or not ISO_TIMESTAMP.fullmatch(value.strip()):
        raise CheckpointError(f"{where}: 'created_at' {value!r} is not an ISO-8601 date-time (2026-10-01T08:00:00Z)")
    text = value.strip().replace("z", "Z").replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CheckpointError(f"{where}: 'created_at' {value!r} is not a valid date-time: {exc}") from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError:
        raise CheckpointError(f"{where}: 'created_at' {value!r} falls outside the years 1-9999 in UTC") from None


def _read_manifest(folder: Path) -> JSONObject:
    manifest = folder / MANIFEST
    if not manifest.exists() and not manifest.is_symlink():
        raise CheckpointError(f"{folder}: no {MANIFEST} (folder still being written?)")
    if not_a_file(manifest) is not None:  # a directory, a FIFO (would block), a device, a dangling link
        raise CheckpointError(f"{manifest}: not a regular file")
    if manifest.stat().st_size > MAX_MANIFEST_BYTES:
        raise CheckpointError(f"{manifest}: larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        data = json.loads(manifest.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{manifest}: not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise CheckpointError(f"{manifest}: not valid JSON: nested too deeply") from exc
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise CheckpointError(f"{manifest}: not valid JSON: {exc}") from exc
    except OSError as exc:
        raise CheckpointError(f"{manifest}: cannot be read: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{manifest}: expected a JSON object")
    return data


def _rubric_files(folder: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """The folder's ``<rubric>.jsonl`` files (regular files inside the folder), and the others named so, each
    with why it is not read (a directory, a FIFO, a dangling link, a link out of the folder)."""
    inside = folder.resolve()
    files, refused = {}, {}
    for p in sorted(folder.glob("*.jsonl")):
        why = not_a_file(p) or (None if p.resolve().parent == inside else "a link out of the checkpoint folder")
        if why:
            refused[p.stem] = f"{p} is {why}"
        else:
            files[p.stem] = p
    return files, refused


def read_checkpoint(folder: Path) -> Checkpoint:
    """Read one complete checkpoint folder; raise CheckpointError with a clear reason naming the file."""
    try:
        ckpt_id = check_checkpoint_id(folder.name)
    except UnsafeIdentifierError as exc:
        raise CheckpointError(f"{folder}: {exc}") from exc
    data = _read_manifest(folder)
    manifest = folder / MANIFEST
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise CheckpointError(f"{manifest}: 'model' must be a non-empty string")
    created = normalise_created_at(data.get("created_at"), str(manifest))
    parent = data.get("parent")
    if parent is not None:
        try:
            check_checkpoint_id(parent)
        except UnsafeIdentifierError as exc:
            raise CheckpointError(f"{manifest}: parent: {exc}") from exc
        if parent == ckpt_id:
            raise CheckpointError(f"{manifest}: parent: a checkpoint cannot be its own parent")
    files, refused = _rubric_files(folder)
    if not files:
        why = "; ".join(refused.values()) if refused else "it holds no <rubric>.jsonl file"
        raise CheckpointError(f"{folder}: nothing to evaluate: {why}")
    return Checkpoint(ckpt_id, folder, model.strip(), created, parent, files, refused)


@dataclass
class Scan:
    complete: list[Checkpoint]
    incomplete: list[str]
    refused: list[str]
    root: Path | None = None  # the folder scanned


def scan_checkpoints(root: Path | None = None) -> Scan:
    """Complete, incomplete (no manifest yet) and refused folders under ``root``, sorted by id."""
    root = Path(root) if root else settings.checkpoint_dir()
    scan = Scan([], [], [], root)
    if not root.is_dir():
        return scan
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        manifest = folder / MANIFEST
        if not manifest.exists() and not manifest.is_symlink():
            scan.incomplete.append(folder.name)
            continue
        try:
            scan.complete.append(read_checkpoint(folder))
        except CheckpointError as exc:
            scan.refused.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - one bad folder is reported, the rest goes on
            scan.refused.append(f"{folder}: cannot be read: {type(exc).__name__}: {exc}")
    _refuse_parent_cycles(scan)
    return scan


def _refuse_parent_cycles(scan: Scan) -> None:
    """Checkpoints whose parents lead back to themselves are refused (a comparison would loop or compare a
    checkpoint with itself)."""
    parents = {c.checkpoint_id: c.parent for c in scan.complete}
    cyclic: set[str] = set()
    for start in parents:
        seen: list[str] = []
        node: str | None = start
        while node is not None and node in parents and node not in seen:
            seen.append(node)
            node = parents[node]
        if node is not None and node in seen:
            cyclic |= set(seen[seen.index(node) :])
    if cyclic:
        order = " -> ".join(sorted(cyclic))
        scan.refused += [
            f"{c.path / MANIFEST}: parent: part of a parent cycle ({order})"
            for c in scan.complete
            if c.checkpoint_id in cyclic
        ]
        scan.complete = [c for c in scan.complete if c.checkpoint_id not in cyclic]


def checkpoint_folder(checkpoint_id: str, root: Path | None = None) -> Path:
    root = Path(root) if root else settings.checkpoint_dir()
    return root / check_checkpoint_id(checkpoint_id)
