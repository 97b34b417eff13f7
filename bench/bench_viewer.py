#!/usr/bin/env python3
"""The viewer on a big checkpoint: latency of the samples page (filtered, sorted, paged) and of a sample page
on a checkpoint of 100,000 samples with a 100,000-sample parent, the compare page and the leaderboard
matrix, against the same pages on the 60-sample
demo checkpoint (the baseline, in the same process). Goal: under 200 ms a page on this machine.

The big warehouse is built from a real materialization of npc_dialogue (ckpt-0200 and ckpt-0300, offline
judge): every table keyed by sample is multiplied with new sample ids in SQL, so the columns, types and
row shapes are the pipeline's own.

    python bench/bench_viewer.py [--samples 100000] [--warehouse file|ducklake]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAGES = [
    ("samples, all, by id", "/r/npc_dialogue/ckpt-0300/samples"),
    (
        "samples, regressed, by change",
        "/r/npc_dialogue/ckpt-0300/samples?score=dialogue_naturalness&filter=regressed&sort=delta",
    ),
    (
        "samples, score range, sorted",
        "/r/npc_dialogue/ckpt-0300/samples?score=persona_consistency&lo=2&hi=4&sort=plot_relevance&order=desc&page=7",
    ),
    (
        "samples, judge-human gap",
        "/r/npc_dialogue/ckpt-0300/samples?score=dialogue_naturalness&filter=disagree&sort=disagreement&order=desc",
    ),
    ("samples, text search", "/r/npc_dialogue/ckpt-0300/samples?q=blacksmith"),
    ("sample page with parent diff", "/r/npc_dialogue/ckpt-0300/s/npc-007"),
    ("checkpoint page", "/r/npc_dialogue/ckpt-0300"),
    ("compare page (any two)", "/r/npc_dialogue/compare?a=ckpt-0200&b=ckpt-0300"),
    (
        "compare, worse on a score",
        "/r/npc_dialogue/compare?a=ckpt-0200&b=ckpt-0300&score=persona_consistency&dir=worse",
    ),
    ("leaderboard with matrix", "/"),
]


def build(tmp: Path, spec: str) -> str:
    import dagster as dg

    from eval_pipeline.defs.build import build_definitions
    from eval_pipeline.runtime.runner import materialize_checkpoints

    os.environ.update(EVAL_WORKLIST_DIR=str(tmp / "wl"), EVAL_REPORT_DIR=str(tmp / "rep"))
    with dg.instance_for_test() as instance:
        defs = build_definitions(ROOT / "rubric_configs", spec, str(ROOT / "data" / "checkpoints"))
        assert all(
            o.success for o in materialize_checkpoints(defs, instance, ["ckpt-0200", "ckpt-0300"], {"npc_dialogue"})
        )
    return spec


def multiply(spec: str, n: int) -> None:
    """Every table keyed by sample gets n rows per checkpoint: copies with ids <id>-<k>."""
    from eval_pipeline.storage.warehouse import Warehouse, transaction

    wh = Warehouse(spec)
    per = wh.query_rows("SELECT count(*) FROM npc_dialogue.scores WHERE checkpoint_id = 'ckpt-0300'")[0][0]
    copies = -(-n // per) - 1
    with wh.writing() as con, transaction(con):
        for table in ("samples", "scores", "judge_scores", "metrics", "human_ratings", "raw_outputs"):
            cols = [
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = 'npc_dialogue' "
                    "AND table_name = ? ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            ]

            def expr(c: str) -> str:
                if c == "sample_id":
                    return "sample_id || '-' || k"
                if c == "line_number":
                    return "line_number + k * 1000"
                return f'"{c}"'

            if table == "human_ratings":  # ratings on 1,000 samples, as a team would have
                src = "(SELECT * FROM npc_dialogue.human_ratings) , range(1, ?) r(k)"
                params = [max(1, 1000 // per)]
            else:
                src = "(SELECT * FROM npc_dialogue." + table + "), range(1, ?) r(k)"
                params = [copies + 1]
            con.execute(
                f"INSERT INTO npc_dialogue.{table} ({', '.join(repr(c).replace(chr(39), chr(34)) for c in cols)}) "
                f"SELECT {', '.join(expr(c) for c in cols)} FROM {src}",
                params,
            )


def timed(client, path: str, repeat: int) -> float:
    client.get(path)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        r = client.get(path)
        times.append(time.perf_counter() - t)
        assert r.status_code == 200, (path, r.status_code)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--warehouse", choices=["file", "ducklake"], default="file")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    from starlette.testclient import TestClient

    from eval_pipeline.publish.viewer.app import create_app
    from eval_pipeline.storage.warehouse import Warehouse

    tmp = Path(tempfile.mkdtemp(prefix="bench_viewer_"))

    def spec(name: str) -> str:
        return f"ducklake:sqlite:{tmp / name}.sqlite" if args.warehouse == "ducklake" else str(tmp / f"{name}.duckdb")

    small = build(tmp, spec("small"))
    big = build(tmp, spec("big"))
    t = time.perf_counter()
    multiply(big, args.samples)
    n = Warehouse(big).query_rows("SELECT count(*) FROM npc_dialogue.scores WHERE checkpoint_id = 'ckpt-0300'")[0][0]
    print(
        f"viewer on {args.warehouse}: big checkpoint {n:,} samples (parent the same), "
        f"built in {time.perf_counter() - t:.1f}s"
    )
    base = TestClient(create_app(Warehouse(small), ROOT / "rubric_configs"))
    large = TestClient(create_app(Warehouse(big), ROOT / "rubric_configs"))
    print(f"  {'page':34s} {'60 samples':>11s} {f'{n:,} samples':>15s} {'ratio':>7s}  goal < 200 ms")
    worst = 0.0
    for name, path in PAGES:
        a = timed(base, path, args.repeat)
        b = timed(large, path, args.repeat)
        worst = max(worst, b)
        print(f"  {name:34s} {a:9.1f}ms {b:13.1f}ms {b / a:6.2f}x  {'ok' if b < 200 else 'SLOW'}")
    print(f"  slowest page at {n:,} samples: {worst:.0f} ms ({'within' if worst < 200 else 'over'} the 200 ms goal)")


if __name__ == "__main__":
    main()
