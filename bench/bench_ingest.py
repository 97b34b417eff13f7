#!/usr/bin/env python3
"""Ingest at scale: one checkpoint of N JSONL lines (1 % bad) through the real raw_outputs and samples
assets into a DuckDB file (or a DuckLake on SQLite). Prints lines per second and the process's peak RSS.

    python bench/bench_ingest.py [--lines 1000000] [--warehouse file|ducklake]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path

import dagster as dg
import duckdb

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.ingest.jsonl import iter_jsonl
from eval_pipeline.runtime.runs import register_checkpoints
from eval_pipeline.storage.warehouse import Warehouse

ROOT = Path(__file__).resolve().parent.parent
GOAL_S, GOAL_MB = 15.0, 1024  # issue #17: 1M lines through raw_outputs + samples


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--warehouse", choices=["file", "ducklake"], default="file", help="DuckDB file or DuckLake/SQLite")
    ap.add_argument("--reference", action="store_true", help="also run the row-wise validator and compare")
    args = ap.parse_args()
    base = []
    for line in (ROOT / "data/checkpoints/ckpt-0100/npc_dialogue.jsonl").read_text().splitlines():
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (
            isinstance(d, dict)
            and isinstance(d.get("response"), str)
            and d["response"].strip()
            and isinstance(d.get("game_state"), dict)
        ):
            base.append(d)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ckpts" / "ckpt-big"
        folder.mkdir(parents=True)
        rng = random.Random(3)
        t0 = time.perf_counter()
        with open(folder / "npc_dialogue.jsonl", "w", encoding="utf-8") as fh:
            for i in range(args.lines):
                if i % 100 == 42:
                    fh.write('{"sample_id": "broken", "response": \n')
                    continue
                fh.write(json.dumps({**rng.choice(base), "sample_id": f"n{i}"}) + "\n")
        (folder / "checkpoint.json").write_text('{"model": "bench", "created_at": "2026-11-01T00:00:00Z"}')
        size_mb = (folder / "npc_dialogue.jsonl").stat().st_size / 1e6
        print(f"wrote {args.lines} lines ({size_mb:.0f} MB) in {time.perf_counter() - t0:.1f}s")
        wh_path = (
            str(Path(tmp) / "w.duckdb") if args.warehouse == "file" else f"ducklake:sqlite:{Path(tmp) / 'lake.sqlite'}"
        )
        defs = build_definitions(None, wh_path, str(Path(tmp) / "ckpts"))
        instance = dg.DagsterInstance.ephemeral()
        register_checkpoints(instance, ["ckpt-big"])
        assets = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition)]
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t1 = time.perf_counter()
        walls, peaks = {}, {}
        for step in ("raw_outputs", "samples"):
            t = time.perf_counter()
            res = dg.materialize(
                assets,
                instance=instance,
                partition_key="ckpt-big",
                resources=defs.resources,
                selection=dg.AssetSelection.assets(dg.AssetKey(["npc_dialogue", step])),
            )
            walls[step] = time.perf_counter() - t
            peaks[step] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            if not res.success:
                break
        wall = time.perf_counter() - t1
        wh = Warehouse(wh_path)
        valid = wh.query_rows("SELECT count(*) FROM npc_dialogue.samples")[0][0]
        bad = wh.query_rows("SELECT count(*) FROM main.quarantine")[0][0]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        path = folder / "npc_dialogue.jsonl"
        t = time.perf_counter()
        duckdb.connect().execute(  # typed, every column read (a count alone would skip the parsing)
            f"CREATE TEMP TABLE bare AS SELECT * FROM read_json('{path}', format='newline_delimited', "
            "ignore_errors=true)"
        )
        bare = time.perf_counter() - t
        print(f"DuckDB's bare read_json of the same file: {bare:.1f}s; the two assets took {wall / bare:.1f}x that")
        if args.reference:
            _compare_with_rowwise(wh, path, defs)
        print(
            f"success {res.success}: {valid} valid + {bad} quarantined = {valid + bad} of {args.lines} lines in "
            f"{wall:.1f}s "
            f"({args.lines / wall:,.0f} lines/s), peak RSS {peak:.0f} MB"
        )
        print(
            f"  goal <= {GOAL_S:.0f}s: {wall / GOAL_S:.2f}x; goal <= {GOAL_MB} MB peak RSS: {peak / GOAL_MB:.2f}x"
            + ("" if args.lines == 1_000_000 else f" (the goals are for 1,000,000 lines, this ran {args.lines:,})")
        )
        print(
            f"  before the assets: peak RSS {before:.0f} MB; "
            + "; ".join(
                f"{k}: {walls[k]:.1f}s ({args.lines / walls[k]:,.0f} lines/s), peak RSS so far {peaks[k]:.0f} MB"
                for k in walls
            )
        )


def _compare_with_rowwise(wh: Warehouse, path: Path, defs: dg.Definitions) -> None:
    """The split and every reason against the row-by-row reference (the validator before #17), same file."""
    from eval_pipeline.ingest.rowwise import validate_raw as rowwise
    from eval_pipeline.rubrics import load_rubric

    rubric = load_rubric(ROOT / "rubric_configs/npc_dialogue.yaml")
    t = time.perf_counter()
    seen: set[str] = set()
    ref_valid: list[int] = []
    ref_bad: dict[int, str] = {}
    for chunk in iter_jsonl(path, "ckpt-big"):
        res = rowwise(rubric, chunk.frame, seen_ids=seen)
        ref_valid += res.samples["line_number"].tolist()
        ref_bad.update(zip(res.quarantine["line_number"].tolist(), res.quarantine["reason"].tolist()))
    took = time.perf_counter() - t
    valid = [r[0] for r in wh.query_rows("SELECT line_number FROM npc_dialogue.samples ORDER BY line_number")]
    bad = dict(wh.query_rows("SELECT line_number, reason FROM main.quarantine WHERE stage = 'validate'"))
    same = valid == sorted(ref_valid) and bad == ref_bad
    print(
        f"row-wise reference (validation only, in this process): {took:.1f}s; valid/quarantine split and every "
        f"reason identical: {same} ({len(ref_valid)} valid, {len(ref_bad)} quarantined)"
    )
    if not same:
        raise SystemExit("the engine's validation differs from the row-wise reference")


if __name__ == "__main__":
    main()
