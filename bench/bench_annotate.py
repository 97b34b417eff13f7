#!/usr/bin/env python3
"""The annotate app on a checkpoint of 100,000 samples: the median latency of an item page and of a submit (the
durable write included: temporary file, fsync, rename, fsync of the folder), against the viewer's sample page on
the same warehouse in the same run (the baseline). Goals: the item page under 100 ms, a submit under 50 ms.

The big warehouse is bench_viewer's: a real materialization of npc_dialogue, every table keyed by sample
multiplied in SQL to the asked size, ratings on 1,000 samples.

    python bench/bench_annotate.py [--samples 100000] [--repeat 30] [--warehouse file|ducklake]
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
sys.path.insert(0, str(ROOT / "bench"))

from bench_viewer import build, multiply  # noqa: E402

RUBRIC, CKPT = "npc_dialogue", "ckpt-0300"


def median_ms(fn, repeat: int) -> float:
    fn()  # warm: the checkpoint's item lists are made once per process
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--warehouse", choices=["file", "ducklake"], default="ducklake")
    args = ap.parse_args()
    from starlette.testclient import TestClient

    from eval_pipeline.publish.annotate.app import create_app as annotate_app
    from eval_pipeline.publish.viewer.app import create_app as viewer_app
    from eval_pipeline.rubrics import load_rubrics
    from eval_pipeline.storage.warehouse import Warehouse

    tmp = Path(tempfile.mkdtemp(prefix="bench_annotate_"))
    spec = f"ducklake:sqlite:{tmp / 'big'}.sqlite" if args.warehouse == "ducklake" else str(tmp / "big.duckdb")
    os.environ["EVAL_RATINGS_DIR"] = str(tmp / "ratings")
    build(tmp, spec)
    multiply(spec, args.samples)
    wh = Warehouse(spec, read_only=True)
    ids = [
        r[0] for r in wh.query_rows(f"SELECT sample_id FROM {RUBRIC}.samples WHERE checkpoint_id = ? LIMIT 500", [CKPT])
    ]
    n = wh.query_rows(f"SELECT count(*) FROM {RUBRIC}.samples WHERE checkpoint_id = ?", [CKPT])[0][0]
    rubrics = {r.name: r for r in load_rubrics(ROOT / "rubric_configs")}
    viewer = TestClient(viewer_app(wh, ROOT / "rubric_configs"))
    annotate = TestClient(annotate_app(wh, rubrics, tmp / "ratings"), follow_redirects=False)
    assert annotate.post("/login", data={"evaluator": "bench"}).status_code == 303
    home = annotate.get("/").text
    csrf = home.split('name="csrf" value="')[1].split('"')[0]
    k = iter(range(10**9))

    def viewer_page() -> None:
        assert viewer.get(f"/r/{RUBRIC}/{CKPT}/s/{ids[0]}").status_code == 200

    def item_page() -> None:
        assert annotate.get(f"/i/{RUBRIC}/{CKPT}/remainder/{ids[next(k) % len(ids)]}").status_code == 200

    def submit() -> None:
        sid = ids[next(k) % len(ids)]
        form = {"csrf": csrf, "action": "submit", "score_persona_consistency": "4", "score_dialogue_naturalness": "3"}
        assert annotate.post(f"/i/{RUBRIC}/{CKPT}/remainder/{sid}", data=form).status_code == 303

    base = median_ms(viewer_page, args.repeat)
    page = median_ms(item_page, args.repeat)
    save = median_ms(submit, args.repeat)
    print(f"annotate on {args.warehouse}, {n:,} samples in {CKPT}, medians of {args.repeat}:")
    print(f"  viewer sample page (baseline) {base:8.1f} ms")
    print(f"  annotate item page            {page:8.1f} ms  {page / base:5.2f}x the baseline  goal < 100 ms: "
          f"{'ok' if page < 100 else 'SLOW'}")  # fmt: skip
    print(f"  annotate submit (durable)     {save:8.1f} ms  {save / base:5.2f}x the baseline  goal < 50 ms: "
          f"{'ok' if save < 50 else 'SLOW'}")  # fmt: skip


if __name__ == "__main__":
    main()
