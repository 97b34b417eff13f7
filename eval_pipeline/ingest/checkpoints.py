"""Checkpoint folders: ``data/checkpoints/<checkpoint_id>/``.

A folder holds one ``<rubric>.jsonl`` per rubric the checkpoint was evaluated on
and, written last, ``checkpoint.json`` (model name, created time, optional parent
checkpoint). A folder without ``checkpoint.json`` is still being written and is
ignored. Ids are validated before they reach a path or SQL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from eval_pipeline.core import settings
from eval_pipeline.core.ids import UnsafeIdentifierError, check_checkpoint_id

MANIFEST = "checkpoint.json"


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

    def file_for(self, rubric: str) -> Path | None:
        return self.rubric_files.get(rubric)


def read_checkpoint(folder: Path) -> Checkpoint:
    """Read one complete checkpoint folder; raise CheckpointError with a clear reason."""
    try:
        ckpt_id = check_checkpoint_id(folder.name)
    except UnsafeIdentifierError as exc:
        raise CheckpointError(f"{folder}: {exc}") from exc
    manifest = folder / MANIFEST
    try:
        data = json.loads(manifest.read_text(encoding="utf-8-sig"))
    except FileNotFoundError as exc:
        raise CheckpointError(f"{folder}: no {MANIFEST} (folder still being written?)") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{manifest}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{manifest}: expected a JSON object")
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise CheckpointError(f"{manifest}: 'model' must be a non-empty string")
    created = data.get("created_at")
    if not isinstance(created, str):
        raise CheckpointError(f"{manifest}: 'created_at' must be an ISO-8601 string")
    try:
        datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError as exc:
        raise CheckpointError(f"{manifest}: 'created_at' {created!r} is not ISO-8601") from exc
    parent = data.get("parent")
    if parent is not None:
        try:
            check_checkpoint_id(parent)
        except UnsafeIdentifierError as exc:
            raise CheckpointError(f"{manifest}: parent: {exc}") from exc
    files = {p.stem: p for p in sorted(folder.glob("*.jsonl")) if p.is_file()}
    return Checkpoint(ckpt_id, folder, model.strip(), created, parent, files)


@dataclass
class Scan:
    complete: list[Checkpoint]
    incomplete: list[str]
    refused: list[str]


def scan_checkpoints(root: Path | None = None) -> Scan:
    """Complete, incomplete (no manifest yet) and refused folders under ``root``, sorted by id."""
    root = Path(root) if root else settings.checkpoint_dir()
    scan = Scan([], [], [])
    if not root.is_dir():
        return scan
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if not (folder / MANIFEST).exists():
            scan.incomplete.append(folder.name)
            continue
        try:
            scan.complete.append(read_checkpoint(folder))
        except CheckpointError as exc:
            scan.refused.append(str(exc))
    return scan


def checkpoint_folder(checkpoint_id: str, root: Path | None = None) -> Path:
    root = Path(root) if root else settings.checkpoint_dir()
    return root / check_checkpoint_id(checkpoint_id)
