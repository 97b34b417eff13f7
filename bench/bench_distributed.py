#!/usr/bin/env python3
"""The distributed profile: a backfill of the three sample checkpoints on one worker against two, and what a
statement costs on its lake (PostgreSQL catalog, rows on S3) against the default lake (SQLite catalog, local
files). Everything measured in the same run.

The judge is made I/O-bound, as an LLM judge is: the local OpenAI-protocol server answers every call after a fixed
latency (``--latency-ms``), each run asks ``--concurrency`` at once. Each cluster is new (its own PostgreSQL, Redis,
store and lake: no judge cache carried over), started as ``make distributed`` starts it
(eval_pipeline.devtools.distributed), and evaluated with ``eval-pipeline run`` typed where the workers' folders
are not.

    python bench/bench_distributed.py [--latency-ms 1000] [--concurrency 4] [--statements 40]

Prints both wall times and their ratio (the goal: two workers <= 0.6x one), and the medians of a small partition
write and a small read on each lake with their ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from eval_pipeline.devtools import distributed
from eval_pipeline.devtools.openai_stub import StubServer, StubState
from eval_pipeline.storage.warehouse import Warehouse

ROOT = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).with_name("eval-pipeline"))


def backfill(workers: int, judge: dict[str, str]) -> tuple[float, set[str]]:
    """Wall time of `eval-pipeline run` on a new cluster of ``workers``, and the workers that took runs."""
    with distributed.cluster(workers=workers, sensor=False, extra=judge) as c:
        c.upload_samples(ROOT / "data" / "checkpoints", ROOT / "data" / "human_ratings")
        env = c.process_env("you")
        t0 = time.perf_counter()
        done = subprocess.run(
            [CLI, "run", "--no-fail-on-gates"], cwd=c.folder / "you", env=env, capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            said = done.stdout + done.stderr
            failed = [line.strip() for line in said.splitlines() if "step FAILED" in line or "RUN FAILED" in line]
            sys.exit(f"the backfill on {workers} worker(s) failed:\n" + "\n".join(failed or [said[-3000:]]))
        used = subprocess.run(
            [sys.executable, "-c", "import dagster as dg\nwith dg.DagsterInstance.get() as i:\n"
             "    print(*{r.tags.get('eval/worker', '?') for r in i.get_runs()})"],
            cwd=c.folder / "you", env=env, capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        return wall, set(used)


def statements(wh: Warehouse, n: int) -> tuple[float, float]:
    """Medians (ms) of a small partition write (20 rows) and a small read of it, ``n`` of each."""
    frame = pd.DataFrame({"checkpoint_id": ["c"] * 20, "x": range(20), "label": ["a"] * 20})
    writes, reads = [], []
    for i in range(n):
        t0 = time.perf_counter()
        with wh.partition_writer() as w:
            w.write("bench", "small", frame.assign(checkpoint_id=f"c{i % 5}"), {"checkpoint_id": f"c{i % 5}"})
        writes.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        wh.query_rows("SELECT count(*), sum(x) FROM bench.small WHERE checkpoint_id = ?", [f"c{i % 5}"])
        reads.append((time.perf_counter() - t0) * 1000)
    return statistics.median(writes), statistics.median(reads)


def per_statement(n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """The default lake in a temporary folder against the distributed profile's lake, in this process."""
    with tempfile.TemporaryDirectory() as tmp:
        default = statements(Warehouse(f"ducklake:sqlite:{tmp}/catalog.sqlite"), n)
    with distributed.cluster(workers=0, sensor=False, webserver=False) as c:
        env = c.process_env("you")
        saved = dict(os.environ)
        os.environ.update({k: env[k] for k in c.env()})
        try:
            remote = statements(Warehouse(env["EVAL_WAREHOUSE"]), n)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return default, remote


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-ms", type=float, default=1000.0, help="the judge's answer time (default 1000)")
    ap.add_argument("--concurrency", type=int, default=4, help="judge calls a run makes at once (default 4)")
    ap.add_argument("--statements", type=int, default=40, help="small writes and reads timed on each lake")
    args = ap.parse_args()
    with StubServer(state=StubState(latency_s=args.latency_ms / 1000, keep_bodies=False)) as stub:
        judge = {
            "EVAL_JUDGE": "openai",
            "OPENAI_BASE_URL": stub.base_url,
            "OPENAI_API_KEY": "sk-bench-not-a-key",
            "EVAL_JUDGE_CONCURRENCY": str(args.concurrency),
            "EVAL_JUDGE_MODEL": "bench-judge",
        }
        one, used_one = backfill(1, judge)
        two, used_two = backfill(2, judge)
        calls = stub.state.completions
    (dw, dr), (rw, rr) = per_statement(args.statements)
    judged = f"judge {args.latency_ms:g} ms a call, {args.concurrency} at once a run"
    print(f"backfill of ckpt-0100..0300 x 5 rubrics, {judged}")
    print(f"  one worker : {one:7.1f} s  ({', '.join(sorted(used_one))})")
    print(f"  two workers: {two:7.1f} s  ({', '.join(sorted(used_two))})")
    print(f"  ratio two / one: {two / one:.2f}x (goal <= 0.6)   judge calls in both: {calls}")
    print(f"per statement, medians of {args.statements} (ms): default lake vs PostgreSQL catalog + S3 rows")
    print(f"  small partition write: {dw:6.1f} vs {rw:6.1f}  ({rw / dw:.2f}x)")
    print(f"  small read           : {dr:6.1f} vs {rr:6.1f}  ({rr / dr:.2f}x)")


if __name__ == "__main__":
    main()
