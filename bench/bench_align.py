#!/usr/bin/env python3
"""Aligning a judge (#62), on the sample data, in one run of this script: per candidate, the judge calls and the
wall time it took; per alignment, the held-out gain in quadratic kappa with its paired interval.

1. The offline judge, every rubric and every rated dimension whose heuristic weighs two or more features, on the
   sample checkpoints and their ratings (evaluated first into a lake of its own).
2. A model judge (the local OpenAI-protocol server over HTTP, 20 ms a call) on kg_qa's rated samples, with two
   instruction variants and 0 or 3 few-shot examples: once with a server that gives every instruction scores
   unrelated to the people's (the gain must be noise: its interval includes 0), once with one where the second
   variant answers the people's score (the gain must be real). The second pass of each asks nothing: the cache.

    python bench/bench_align.py
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reuse", help="a folder an earlier run of this script left (its evaluated lake)")
    args = ap.parse_args()
    tmp = Path(args.reuse) if args.reuse else Path(tempfile.mkdtemp(prefix="bench-align-"))
    os.environ.update(
        {
            "EVAL_WAREHOUSE": f"ducklake:sqlite:{tmp / 'lake' / 'catalog.sqlite'}",
            "DAGSTER_HOME": str(tmp / "home"),
            "EVAL_CHECKPOINT_DIR": str(ROOT / "data" / "checkpoints"),
            "EVAL_RATINGS_DIR": str(ROOT / "data" / "human_ratings"),
            "EVAL_REPORT_DIR": str(tmp / "reports"),
            "EVAL_WORKLIST_DIR": str(tmp / "worklists"),
            "EVAL_JUDGE": "heuristic",
        }
    )
    (tmp / "home").mkdir(exist_ok=True)
    import dagster as dg

    from eval_pipeline.core import settings
    from eval_pipeline.core.config import RubricConfig
    from eval_pipeline.defs.build import build_definitions
    from eval_pipeline.devtools.openai_stub import StubServer
    from eval_pipeline.judge.align import align, rated_items
    from eval_pipeline.rubrics import load_rubrics
    from eval_pipeline.runtime.runner import materialize_checkpoints
    from eval_pipeline.storage.warehouse import Warehouse

    rubrics = {r.name: r for r in load_rubrics(ROOT / "rubric_configs")}
    t0 = time.perf_counter()
    if args.reuse:
        print(f"the sample checkpoints as evaluated in {tmp}\n")
    else:
        with dg.DagsterInstance.get() as instance:
            materialize_checkpoints(
                build_definitions(ROOT / "rubric_configs"),
                instance,
                ["ckpt-0100", "ckpt-0200", "ckpt-0300"],
                log_level="WARNING",
            )
        print(f"sample checkpoints evaluated in {time.perf_counter() - t0:.0f} s\n")
    wh = Warehouse(settings.warehouse_path())

    def report(name: str, a, seconds: float) -> None:
        per = [t.calls for t in a.tried]
        print(
            f"{name:<44} {len(a.tried):>3} cand  calls/cand {statistics.mean(per):7.1f}  "
            f"s/cand {seconds / len(a.tried):6.2f}  held-out gain {a.gain:+.3f} [{a.gain_low:+.3f}, {a.gain_high:+.3f}]"
            f"  {'RECOMMENDED' if a.recommended else '-'}"
        )

    print("1. the offline judge (feature weights)")
    for r in rubrics.values():
        terms = {d.key: d.heuristic for d in r.judged_dimensions}
        if r.questionnaire:
            terms |= {m.key: m.heuristic for m in r.questionnaire.metrics}
        for dim in [d for d in r.rating_scales if len(terms.get(d, [])) >= 2]:
            items = rated_items(wh, r, [dim])
            if len(items) < 20:
                continue
            start = time.perf_counter()
            a = align(r, settings.judge_config(), wh, items, [dim])
            report(f"{r.name}.{dim} ({len(items)} rated)", a, time.perf_counter() - start)

    print("\n2. a model judge (instructions, few-shot), the local OpenAI-protocol server at 20 ms a call")
    base = rubrics["kg_qa"]
    raw = base.model_dump(mode="json")
    good = "ALIGN-GOOD"
    raw["align"] = {"instructions": ["Be strict.", f"{good}: compare with the source first."], "few_shot": [0, 3]}
    rubric = RubricConfig.model_validate(raw)
    dim = "completeness"
    items = rated_items(wh, rubric, [dim])
    # each answer as the prompt's JSON data block writes it (quotes and newlines escaped), to find it there
    # (the same answer in two checkpoints, rated apart: the people's mean over both, the best a judge reading the
    # text alone can give)
    said: dict[str, list[float]] = {}
    for i in items:
        said.setdefault(json.dumps(i.record["answer"], ensure_ascii=False)[1:-1], []).append(i.human[dim])
    people = {answer: round(statistics.mean(scores)) for answer, scores in said.items()}

    def scorer(marker: str | None):
        def score(body, scales):
            system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
            out = {}
            for k, (lo, hi) in scales.items():
                out[k] = lo + hashlib.sha256(f"{k}|{user}|{system}".encode()).digest()[0] % (hi - lo + 1)
            if marker and marker in system:
                for answer, score_ in people.items():
                    if answer in user:
                        out[dim] = int(score_)
                        break
            return out

        return score

    for label, marker in (("no variant better than chance", None), ("variant 2 answers as people do", good)):
        with StubServer() as server:
            server.state.latency_s = 0.02
            server.state.scorer = scorer(marker)
            os.environ.update({"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-bench"})
            config = settings.judge_config().with_(mode="openai")
            lake = Warehouse(str(tmp / f"judge-{bool(marker)}.duckdb"))
            start = time.perf_counter()
            a = align(rubric, config, lake, items, [dim])
            report(f"kg_qa.{dim}: {label}", a, time.perf_counter() - start)
            start = time.perf_counter()
            again = align(rubric, config, lake, items, [dim])
            print(f"{'  the same alignment again':<44} calls {again.calls}  wall {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
