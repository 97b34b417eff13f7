from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.core.config import load_rubrics

ROOT = Path(__file__).resolve().parent.parent
RUBRIC_DIR = ROOT / "rubric_configs"
SAMPLE_CHECKPOINTS = ROOT / "data" / "checkpoints"


@pytest.fixture(scope="session")
def rubrics():
    return {r.name: r for r in load_rubrics(RUBRIC_DIR)}


@pytest.fixture
def checkpoint_root(tmp_path: Path) -> Path:
    """A private copy of the sample checkpoints."""
    root = tmp_path / "checkpoints"
    shutil.copytree(SAMPLE_CHECKPOINTS, root)
    return root


@pytest.fixture
def warehouse_path(tmp_path: Path) -> str:
    return str(tmp_path / "warehouse.duckdb")


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def write_checkpoint(
    root: Path, ckpt_id: str, files: dict[str, list], manifest: dict | None = None, complete: bool = True
) -> Path:
    """Write a checkpoint folder; `files` maps rubric name -> list of rows (dict or raw str)."""
    folder = root / ckpt_id
    folder.mkdir(parents=True, exist_ok=True)
    for rubric, rows in files.items():
        lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
        (folder / f"{rubric}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if complete:
        m = manifest or {"model": "test-model", "created_at": "2026-10-01T00:00:00Z", "parent": None}
        (folder / "checkpoint.json").write_text(json.dumps(m), encoding="utf-8")
    return folder


@pytest.fixture(autouse=True)
def _isolated_outputs(tmp_path, monkeypatch):
    """Tests never write into the repository's data/ folder."""
    monkeypatch.setenv("EVAL_WORKLIST_DIR", str(tmp_path / "worklists"))
    monkeypatch.setenv("EVAL_REPORT_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("EVAL_RATINGS_DIR", str(ROOT / "data" / "human_ratings"))
