#!/usr/bin/env python3
"""Rank sets across checkpoints (#74): simultaneous coverage and width, against known true means.

Each repetition draws K checkpoints' scores of the same prompts (paired: a prompt effect shared by every checkpoint,
sd 0.15, plus each checkpoint's own noise, sd 0.15; 200 prompts) or of different prompts (unpaired), with true
means in one of three layouts:

* ``spread``: evenly 0.03 apart;
* ``ties``: groups of three equal means, the groups 0.05 apart;
* ``near``: 0.01 apart (near-ties everywhere).

Coverage: every checkpoint's true rank range (from the best to the worst rank its ties could take) inside its set,
for all of them at once, in at least 95 % of 1,000 repetitions. Width: the sets' mean size (high - low + 1) against
Bonferroni's pairwise construction computed here, independently of the project (``z(1 - alpha / (K (K - 1)))``
on the pairs' own standard errors), which they must never exceed.

Then a biased judge: it adds a checkpoint-specific bias (sd 0.04) to every score, so its ranks are of the wrong
quantity; people rate a random 30 % of each checkpoint's samples (the truth plus their noise, sd 0.2). The rank sets
of the judge's means (``judged``) against those of the human-calibrated means (PPI++, ``agreement.ppi.ppi_mean``,
``calibrated``): coverage of the people's true ranks.

    python bench/bench_ranks.py [--reps 1000] [--k 3 7 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy import stats as sps

from eval_pipeline.agreement.ppi import ppi_mean
from eval_pipeline.scoring import ranks

PROMPTS, PROMPT_SD, NOISE_SD = 200, 0.15, 0.15


def true_means(layout: str, k: int) -> np.ndarray:
    if layout == "spread":
        return 0.6 + 0.03 * np.arange(k)
    if layout == "ties":
        return 0.6 + 0.05 * (np.arange(k) // 3)
    return 0.6 + 0.01 * np.arange(k)


def true_ranges(mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each checkpoint's best and worst true rank (higher is better; ties take the whole range)."""
    better = (mu[None, :] > mu[:, None]).sum(1)
    worse = (mu[None, :] < mu[:, None]).sum(1)
    return 1 + better, len(mu) - worse


def draw(rng: np.random.Generator, mu: np.ndarray, paired: bool) -> np.ndarray:
    """Scores, prompts by checkpoints."""
    k = len(mu)
    prompt = rng.normal(0, PROMPT_SD, (PROMPTS, 1 if paired else k))
    return mu[None, :] + prompt + rng.normal(0, NOISE_SD, (PROMPTS, k))


def long(x: np.ndarray, paired: bool) -> pd.DataFrame:
    n, k = x.shape
    ck = np.repeat([f"c{j:02d}" for j in range(k)], n)
    sid = np.tile([f"s{i}" for i in range(n)], k) if paired else [f"c{j}-s{i}" for j in range(k) for i in range(n)]
    return pd.DataFrame({"checkpoint_id": ck, "sample_id": sid, "value": x.T.ravel()})


def bonferroni_sets(mean: np.ndarray, cov: np.ndarray, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Bonferroni's rank sets, this file's own: every pair at alpha / (K (K - 1)) a side."""
    k = len(mean)
    c = sps.norm.ppf(1 - alpha / (k * (k - 1)))
    se = np.sqrt(np.maximum(np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2 * cov, 0))
    d = mean[:, None] - mean[None, :]
    better = d > c * se
    np.fill_diagonal(better, False)
    return 1 + better.sum(0), k - better.sum(1)


def covers(low: np.ndarray, high: np.ndarray, mu: np.ndarray) -> bool:
    best, worst = true_ranges(mu)
    return bool(np.all((low <= best) & (worst <= high)))


def run_layouts(reps: int, ks: list[int], seed: int) -> None:
    print(f"rank sets, {reps} repetitions each ({PROMPTS} prompts a checkpoint; 95 % simultaneous):")
    print(f"{'K':>3} {'layout':>7} {'design':>8} {'covered':>22} {'size':>6} {'Bonferroni size':>16} {'wider':>6}")
    for k in ks:
        for layout in ("spread", "ties", "near"):
            mu = true_means(layout, k)
            for paired in (True, False):
                rng = np.random.default_rng(seed + k * 10 + (layout == "ties") + 2 * (layout == "near") + 5 * paired)
                hit, size, bsize, wider = 0, 0.0, 0.0, 0
                for _ in range(reps):
                    x = draw(rng, mu, paired)
                    m = ranks.judged_moments(long(x, paired))
                    got = ranks.rank_sets(m)
                    order = np.argsort(m.ids)  # ids c00.. sort in checkpoint order
                    low, high = got.rank_low.to_numpy()[order], got.rank_high.to_numpy()[order]
                    hit += covers(low, high, mu)
                    size += float((high - low + 1).mean())
                    bl, bh = bonferroni_sets(
                        x.mean(0), np.cov(x.T) / PROMPTS if paired else np.diag(x.var(0, ddof=1) / PROMPTS)
                    )
                    bsize += float((bh - bl + 1).mean())
                    wider += int(np.any((low < bl) | (high > bh)))
                lo, hi = sps.binomtest(hit, reps).proportion_ci(method="exact")
                print(
                    f"{k:3d} {layout:>7} {'paired' if paired else 'apart':>8} "
                    f"{hit / reps:6.1%} [{lo:5.1%}, {hi:5.1%}] {size / reps:6.2f} {bsize / reps:16.2f} {wider:6d}"
                )


def run_biased(reps: int, ks: list[int], seed: int, share: float = 0.3) -> None:
    print(f"\na biased judge (checkpoint bias sd 0.04), people rating {share:.0%} of each checkpoint's samples:")
    print(
        f"{'K':>3} {'layout':>7} {'judged covers':>22} {'calibrated covers':>22} {'judged size':>11} "
        f"{'calibrated size':>15}"
    )
    for k in ks:
        for layout in ("spread", "ties"):
            mu = true_means(layout, k)
            rng = np.random.default_rng(seed + 1000 + k)
            bias = rng.normal(0, 0.04, k)  # fixed for the judge: what it misjudges about each checkpoint
            hits = {ranks.JUDGED: 0, ranks.CALIBRATED: 0}
            sizes = {ranks.JUDGED: 0.0, ranks.CALIBRATED: 0.0}
            for _ in range(reps):
                truth = draw(rng, mu, True)
                judge = truth + bias[None, :] + rng.normal(0, 0.05, truth.shape)
                people = truth + rng.normal(0, 0.2, truth.shape)
                rated = rng.random(truth.shape) < share
                judged = ranks.rank_sets(ranks.judged_moments(long(judge, True)))
                est = [
                    ppi_mean(people[rated[:, j], j], judge[rated[:, j], j], judge[~rated[:, j], j]) for j in range(k)
                ]
                m = ranks.calibrated_moments(
                    [f"c{j:02d}" for j in range(k)], [e.mean for e in est], [e.se for e in est],
                    [e.n_rated + e.n_unrated for e in est],
                )  # fmt: skip
                calibrated = ranks.rank_sets(m, basis=ranks.CALIBRATED)
                for name, got in ((ranks.JUDGED, judged), (ranks.CALIBRATED, calibrated)):
                    got = got.sort_values("checkpoint_id")
                    low, high = got.rank_low.to_numpy(), got.rank_high.to_numpy()
                    hits[name] += covers(low, high, mu)
                    sizes[name] += float((high - low + 1).mean())
            cells = []
            for name in (ranks.JUDGED, ranks.CALIBRATED):
                lo, hi = sps.binomtest(hits[name], reps).proportion_ci(method="exact")
                cells.append(f"{hits[name] / reps:6.1%} [{lo:5.1%}, {hi:5.1%}]")
            print(
                f"{k:3d} {layout:>7} {cells[0]:>22} {cells[1]:>22} {sizes[ranks.JUDGED] / reps:11.2f} "
                f"{sizes[ranks.CALIBRATED] / reps:15.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--k", type=int, nargs="+", default=[3, 7, 20])
    ap.add_argument("--seed", type=int, default=20261206)
    args = ap.parse_args()
    started = time.perf_counter()
    run_layouts(args.reps, args.k, args.seed)
    run_biased(args.reps, args.k, args.seed)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
