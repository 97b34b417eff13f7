#!/usr/bin/env python3
"""Agreement statistics against the size of the rater panel: one checkpoint's ``compute_agreement`` with 20, 40 and
80 human raters (60 items, each rater rating ~80 % of them), past the rubric's ``pairwise_up_to`` (each rater
against the others: linear in raters) and, as the baseline in the same run, with every pair compared (quadratic:
n(n-1)/2 kappas and rank correlations, each with its bootstrap CI). Prints each time and the ratio of 80 raters to
20 for both. Not a timed test: tests/reliability/test_large_panels.py counts the bootstraps and rows instead.

    python bench/bench_agreement.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from eval_pipeline.agreement.compute import compute_agreement
from eval_pipeline.devtools.panels import rater_panel
from eval_pipeline.rubrics import load_rubric

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rubric = load_rubric(ROOT / "rubric_configs" / "npc_dialogue.yaml")
    pairwise = rubric.model_copy(
        update={"human_ratings": rubric.human_ratings.model_copy(update={"pairwise_up_to": 1000})}
    )
    times: dict[tuple[str, int], float] = {}
    for label, r in (("linear", rubric), ("every pair", pairwise)):
        for n in (20, 40, 80):
            ratings = rater_panel(n)
            runs = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                rows = compute_agreement(r, "c", ratings, None)
                runs.append(time.perf_counter() - t0)
            times[label, n] = statistics.median(runs)
            print(f"{label:>10}  {n:3d} raters  {times[label, n]:7.2f} s  {len(rows):6d} rows")
    for label in ("linear", "every pair"):
        print(f"{label:>10}  80 raters / 20 raters: {times[label, 80] / times[label, 20]:.2f}x")


if __name__ == "__main__":
    main()
