#!/usr/bin/env python3
"""The pipeline against a real model, with its defaults, versus the server's own bound for the same prompts.

llama.cpp's server (built from the pinned PyPI sdist, SmolLM2-135M from its pinned wheel: eval_pipeline.devtools.llama)
on 4 slots and one thread. Two passes over the same prompts, in the same run, each against a fresh server:

- **bound**: the prompts npc_dialogue's judge step and repeats send for ckpt-0300 (the first ``--samples``
  samples; the repeat subset and seeds as the pipeline picks them), posted straight to the server, exactly as
  many in flight as it has slots: what the server can do;
- **pipeline**: ``eval-pipeline run --checkpoint <it> --rubric npc_dialogue`` with every judge setting at its
  default, on a fresh lake: what a person gets.

Prints both wall times, the ratio (the goal: <= 1.15), and the calls the pipeline's client cut on time-outs per step
(the goal: 0 after the first step).

    python bench/bench_judge_real.py [--samples 66]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from eval_pipeline.core.config import JudgeSpec
from eval_pipeline.core.judge_config import judge_config
from eval_pipeline.devtools import llama
from eval_pipeline.ingest.samples import to_records
from eval_pipeline.ingest.validation import validate_file
from eval_pipeline.judge.llm_rows import _score_specs, repeat_settings
from eval_pipeline.judge.repeat import pick_subset
from eval_pipeline.rubrics import load_rubric

ROOT = Path(__file__).resolve().parent.parent
RUBRIC = "npc_dialogue"


def bodies(samples: int) -> list[dict]:
    """The request bodies the pipeline sends for the main scoring and each repeat, as it builds them."""
    rubric = load_rubric(ROOT / "rubric_configs" / f"{RUBRIC}.yaml")
    with tempfile.TemporaryDirectory() as tmp:  # the samples as the pipeline validates them (bad lines left out)
        folder = llama.small_checkpoint(ROOT / "data" / "checkpoints" / "ckpt-0300", Path(tmp), samples)
        valid = validate_file(rubric, folder / f"{RUBRIC}.jsonl", "ckpt-llm").samples
    records = to_records(rubric, valid.sort_values("line_number"))
    spec = (rubric.panel.judges or [JudgeSpec(name="default")])[0]
    base = replace(judge_config().for_judge(spec), model=llama.MODEL_NAME)
    out = []
    for repeat in range(rubric.repeat.times if rubric.repeat else 1):
        subset = records if repeat == 0 else pick_subset(rubric, "ckpt-llm", records, rubric.repeat)
        s = repeat_settings(base, repeat)
        for _rec, _qn, _scales, call in _score_specs(rubric, s, subset, repeat):
            body = {"model": s.model, "messages": call.messages, "temperature": s.temperature}
            body |= {"max_tokens": s.max_tokens, "seed": s.seed}
            body["response_format"] = {"type": "json_schema", "json_schema": call.schema}
            out.append(body)
    return out


def bound(server: llama.LlamaServer, requests: list[dict]) -> float:
    def post(body: dict) -> None:
        req = urllib.request.Request(
            f"{server.base_url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=3600) as r:
            r.read()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(server.slots) as pool:
        list(pool.map(post, requests))
    return time.perf_counter() - t0


def pipeline(server: llama.LlamaServer, samples: int) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "rubric_configs").symlink_to(ROOT / "rubric_configs")
        llama.small_checkpoint(ROOT / "data" / "checkpoints" / "ckpt-0300", root / "data" / "checkpoints", samples)
        (root / "data" / "human_ratings").mkdir()
        env = llama.judge_env(llama.without_settings(dict(os.environ)), server, root)
        cli = str(Path(sys.executable).with_name("eval-pipeline"))
        t0 = time.perf_counter()
        subprocess.run([cli, "run", "--checkpoint", "ckpt-llm", "--rubric", RUBRIC, "--no-fail-on-gates"], env=env,
                       cwd=root, check=False, capture_output=True)  # fmt: skip
        wall = time.perf_counter() - t0
        usage = subprocess.run(
            [cli, "sql", f"SELECT step, calls, start_concurrency, timeout_cuts, wall_s FROM {RUBRIC}.judge_usage"],
            env=env, cwd=root, capture_output=True, text=True,
        )  # fmt: skip
        return wall, usage.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=66, help="samples of ckpt-0300 (default: all 66)")
    args = ap.parse_args()
    requests = bodies(args.samples)
    with llama.serving(slots=4) as server:
        t_bound = bound(server, requests)
    with llama.serving(slots=4) as server:
        t_pipe, usage = pipeline(server, args.samples)
    print(f"{RUBRIC} x ckpt-0300, {args.samples} samples, {len(requests)} prompts (repeats included), 4 slots:")
    print(f"  server's own bound (4 in flight, straight to the server): {t_bound:7.1f} s")
    print(f"  eval-pipeline run with the defaults (whole command)      : {t_pipe:7.1f} s")
    print(f"  ratio: {t_pipe / t_bound:.2f}x (goal <= 1.15)")
    print(usage)


if __name__ == "__main__":
    main()
