#!/usr/bin/env python3
"""Batch against online judging (#61): one checkpoint x five rubrics judged by the same judge (the local
OpenAI-protocol server, devtools.openai_stub, and its Batch API, devtools.stub_batches), in one run of this script:
HTTP requests made to the endpoint, what the judging cost at the same per-token prices (batch at half:
``batch_discount: 0.5``), and the judge steps' own wall time (judge_usage.wall_s: the provider's queue left out).
Goal: cost 0.5x online, requests <= 1 % of online's. Prints the figures and the ratios; not a timed test.

    python bench/bench_batch.py [--samples 2000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.devtools.openai_stub import StubServer
from eval_pipeline.rubrics import load_rubrics
from eval_pipeline.runtime.runner import materialize_checkpoints
from eval_pipeline.storage.warehouse import Warehouse

ROOT = Path(__file__).resolve().parent.parent
PRICES = "currency: USD\nbatch_discount: 0.5\nmodels:\n  gpt-4o-mini: {input: 0.15, output: 0.60}\n"


def checkpoint(root: Path, samples: int) -> None:
    """ckpt-bench: every rubric's valid sample lines of ckpt-0100, repeated to ``samples`` lines, each response made
    its own (a distinct prompt each)."""
    folder = root / "ckpt-bench"
    folder.mkdir(parents=True)
    source = ROOT / "data" / "checkpoints" / "ckpt-0100"
    shutil.copy(source / "checkpoint.json", folder / "checkpoint.json")
    manifest = json.loads((folder / "checkpoint.json").read_text())
    manifest["checkpoint_id"] = "ckpt-bench"
    manifest.pop("parent_id", None)
    (folder / "checkpoint.json").write_text(json.dumps(manifest))
    for rubric in load_rubrics(ROOT / "rubric_configs"):
        good = []
        for line in (source / f"{rubric.name}.jsonl").read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and isinstance(row.get(rubric.inputs.response_field), str):
                good.append(row)
        out = []
        for i in range(samples):
            row = dict(good[i % len(good)])
            row[rubric.inputs.id_field] = f"bench-{i:06d}"
            row[rubric.inputs.response_field] = f"{row[rubric.inputs.response_field]} (take {i})"
            out.append(json.dumps(row))
        (folder / f"{rubric.name}.jsonl").write_text("\n".join(out) + "\n")


def judged(lake: str) -> tuple[float, float, int]:
    """(cost, the judge steps' wall seconds, prompts still waiting) from main.judge_usage."""
    wh = Warehouse(lake)
    cost, wall = wh.query_rows("SELECT coalesce(sum(cost), 0), coalesce(sum(wall_s), 0) FROM main.judge_usage")[0]
    waiting = wh.query_rows(
        "SELECT count(*) FROM main.verdicts WHERE verdict = 'pending judge' AND checkpoint_id = 'ckpt-bench'"
    )[0][0]
    return float(cost), float(wall), int(waiting)


def main() -> None:
    import os

    import dagster as dg

    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=2000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    checkpoint(tmp / "checkpoints", args.samples)
    (tmp / "prices.yaml").write_text(PRICES)
    os.environ.update(
        EVAL_JUDGE="openai",
        OPENAI_API_KEY="sk-bench",
        EVAL_PRICES=str(tmp / "prices.yaml"),
        EVAL_JUDGE_CONCURRENCY="64",
    )
    figures = {}
    with StubServer() as stub:
        os.environ["OPENAI_BASE_URL"] = stub.base_url
        for mode in ("online", "batch"):
            os.environ["EVAL_JUDGE_MODE"] = mode
            lake = f"ducklake:sqlite:{tmp / mode / 'catalog.sqlite'}"
            defs = build_definitions(ROOT / "rubric_configs", lake, str(tmp / "checkpoints"))
            stub.state.reset_counts()
            stub.state.keep_bodies = False
            stub.state.desk.routes.clear()
            t0 = time.perf_counter()
            with dg.instance_for_test() as instance:
                runs = 0
                while True:
                    outcomes = materialize_checkpoints(defs, instance, ["ckpt-bench"])
                    runs += 1
                    assert all(o.success for o in outcomes), [o.failures for o in outcomes]
                    if mode == "online" or not judged(lake)[2]:
                        break
                    while any(
                        b["status"] not in ("completed", "failed", "expired", "cancelled")
                        for b in stub.state.desk.batches.values()
                    ):
                        time.sleep(0.2)
            cost, wall, _ = judged(lake)
            requests = stub.state.requests + sum(stub.state.desk.routes.values())
            figures[mode] = dict(
                requests=requests, cost=cost, judge_wall_s=wall, runs=runs, total_s=time.perf_counter() - t0
            )
            print(
                f"{mode:>6}: {requests:>7} HTTP requests, cost {cost:.4f} USD, judge steps {wall:.1f} s, "
                f"{runs} evaluation(s) of the checkpoint, {figures[mode]['total_s']:.1f} s in all",
                flush=True,
            )
    o, b = figures["online"], figures["batch"]
    print(
        f"batch / online: requests {b['requests'] / o['requests']:.4f} (goal <= 0.01), "
        f"cost {b['cost'] / o['cost']:.3f} (goal 0.5), judge wall {b['judge_wall_s'] / o['judge_wall_s']:.2f}"
    )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
