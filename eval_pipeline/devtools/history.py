"""A long checkpoint history made from the sample data, for the landing benchmark and the tests that land many
checkpoints (bench/bench_landing.py, tests/defs/test_landing.py).

``write_history(root, ratings_root, n)`` writes checkpoints ``h-0001`` … ``h-<n>``: each a copy of one sample
checkpoint (ckpt-0100, -0200, -0300 in turn), every file the sample has (or only ``rubrics``), its parent the one
before it, ``created_at`` a day apart; and, for every ``rated_every``-th checkpoint, the sample's rating file of that
rubric copied onto it (the same evaluators, its ``checkpoint`` column naming the copy). Deterministic: the same
arguments give the same bytes.

    python -m eval_pipeline.devtools.history <checkpoint_root> <ratings_root> <n> [--rubric kg_qa ...]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

from eval_pipeline.core import settings

SOURCES = ("ckpt-0100", "ckpt-0200", "ckpt-0300")
START = datetime(2026, 1, 1, 8, tzinfo=timezone.utc)


def checkpoint_id(i: int) -> str:
    """The id of the i-th checkpoint of the history (1-based)."""
    return f"h-{i:04d}"


def _samples_root() -> Path:
    return settings.project_root() / "data" / "checkpoints"


def _ratings_source() -> Path:
    return settings.project_root() / "data" / "human_ratings"


def write_checkpoint(root: Path, i: int, rubrics: Sequence[str] | None = None) -> str:
    """Checkpoint ``i`` of the history under ``root`` (its jsonl files first, ``checkpoint.json`` last); its id."""
    ckpt = checkpoint_id(i)
    source = _samples_root() / SOURCES[(i - 1) % len(SOURCES)]
    folder = root / ckpt
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.glob("*.jsonl")):
        if rubrics is None or path.stem in rubrics:
            (folder / path.name).write_bytes(path.read_bytes())
    manifest = {
        "model": "history",
        "created_at": (START + timedelta(days=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "parent": checkpoint_id(i - 1) if i > 1 else None,
    }
    (folder / "checkpoint.json").write_text(json.dumps(manifest), encoding="utf-8")
    return ckpt


def write_ratings(ratings_root: Path, i: int, rubrics: Sequence[str] | None = None, evaluator_suffix: str = "") -> int:
    """The sample's rating files of checkpoint ``i``'s source, copied onto it (``evaluator_suffix`` appended to
    every evaluator's name: a changed file of the same rows); rating rows written."""
    ckpt = checkpoint_id(i)
    src = SOURCES[(i - 1) % len(SOURCES)]
    written = 0
    for folder in sorted(p for p in _ratings_source().iterdir() if p.is_dir()):
        if rubrics is not None and folder.name not in rubrics:
            continue
        path = folder / f"{src}.csv"
        if not path.exists():
            continue
        rows = list(csv.DictReader(path.open(encoding="utf-8", newline="")))
        if not rows:
            continue
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for r in rows:
            r = dict(r)
            if "checkpoint" in r:
                r["checkpoint"] = ckpt
            if evaluator_suffix and "evaluator" in r:
                r["evaluator"] = f"{r['evaluator']}{evaluator_suffix}"
            w.writerow(r)
        (ratings_root / folder.name).mkdir(parents=True, exist_ok=True)
        (ratings_root / folder.name / f"{ckpt}.csv").write_text(out.getvalue(), encoding="utf-8")
        written += len(rows)
    return written


def write_history(
    root: Path, ratings_root: Path, n: int, rubrics: Sequence[str] | None = None, rated_every: int = 2, start: int = 1
) -> list[str]:
    """Checkpoints ``start`` … ``n`` of the history, with ratings on every ``rated_every``-th (0: none); their ids."""
    ids = []
    for i in range(start, n + 1):
        ids.append(write_checkpoint(root, i, rubrics))
        if rated_every and i % rated_every == 0:
            write_ratings(ratings_root, i, rubrics)
    return ids


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eval_pipeline.devtools.history", description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint_root", type=Path)
    ap.add_argument("ratings_root", type=Path)
    ap.add_argument("n", type=int)
    ap.add_argument("--rubric", action="append")
    ap.add_argument("--rated-every", type=int, default=2)
    args = ap.parse_args(argv)
    ids = write_history(args.checkpoint_root, args.ratings_root, args.n, args.rubric, args.rated_every)
    print(f"{len(ids)} checkpoints: {ids[0]} … {ids[-1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
