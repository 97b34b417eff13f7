#!/usr/bin/env python3
"""Judge throughput against a local OpenAI-protocol server (run in its own process) with fixed latency.

N uncached calls at each concurrency, wall time against the bound calls x latency / concurrency, twice:
cold (the judge's worker processes start in it: a fresh interpreter each, ~1 s) and warm (the same workers,
reused, with new prompts); then the same prompts again (expected: 0 calls). Prints the ratios; not a timed
test.

    python bench/bench_judge_throughput.py [--calls 2000] [--latency-ms 200] [--concurrency 16 64]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from eval_pipeline.core.judge_config import judge_config
from eval_pipeline.devtools.openai_stub import stub_process
from eval_pipeline.judge import workers
from eval_pipeline.judge.runner import judge_samples
from eval_pipeline.rubrics import load_rubric
from eval_pipeline.storage.warehouse import Warehouse

ROOT = Path(__file__).resolve().parent.parent


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--latency-ms", type=float, default=200)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    args = ap.parse_args()
    with stub_process("--latency-ms", str(args.latency_ms), "--asgi") as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        rubric = load_rubric(ROOT / "rubric_configs" / "empathetic_dialogue.yaml")
        for c in args.concurrency:
            workers.shutdown_workers()  # each concurrency starts cold: the workers' start-up is in the first pass
            with tempfile.TemporaryDirectory() as tmp:
                wh = Warehouse(str(Path(tmp) / "w.duckdb"))
                for phase in ("cold", "warm"):
                    recs = [
                        {
                            "sample_id": f"s{i}",
                            "topic": "t",
                            "user_statement": f"I feel low about {i} ({c}, {phase}).",
                            "response": f"That sounds hard, {i}.",
                        }
                        for i in range(args.calls)
                    ]
                    pids = [w.pid for w in workers._POOL]
                    judged = judge_config().with_(mode="openai")
                    t0, cpu0, srv0 = time.perf_counter(), time.process_time(), proc_cpu_s(server.pid)
                    kids0 = sum(proc_cpu_s(p) for p in pids)
                    _, st = judge_samples(rubric, "b", recs, wh, config=judged.with_(concurrency=c))
                    wall = time.perf_counter() - t0
                    kids = sum(proc_cpu_s(w.pid) for w in workers._POOL) - kids0
                    cpu, srv = time.process_time() - cpu0, proc_cpu_s(server.pid) - srv0
                    bound = st.calls * args.latency_ms / 1000 / c
                    t1 = time.perf_counter()
                    _, st2 = judge_samples(rubric, "b", recs, wh, config=judged.with_(concurrency=c))
                    again = time.perf_counter() - t1
                    print(
                        f"concurrency {c:3d} ({phase}, {st.processes} process(es)): {st.calls} calls in {wall:6.2f}s, "
                        f"bound {bound:5.2f}s, ratio {wall / bound:4.2f}x, max in flight {st.max_in_flight}; "
                        f"CPU per call: client {cpu / st.calls * 1000:.1f} ms + workers {kids / st.calls * 1000:.1f} "
                        f"ms, server {srv / st.calls * 1000:.1f} ms; second run {st2.calls} calls, {again:5.2f}s",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
