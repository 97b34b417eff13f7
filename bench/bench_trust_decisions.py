#!/usr/bin/env python3
"""Trust decided again after every rating: the error rates of the old rule and the new one, in the same run.

Simulated judges on a 1-5 scale with a known true quadratic kappa against the people's (rounded) mean, 0.40 to
0.80, with one and with two people rating each item; ratings arrive one at a time up to 300 and the verdict is
decided again after each, from the rubric's floor (30) on:

* old rule: ``trusted`` when the point estimates reach the bar (kappa_q >= 0.6, Spearman >= 0.5), else
  ``untrusted``;
* new rule: ``agreement.sequential`` (anytime-valid confidence sequences, margin 0.05, alpha 0.05).

The truth is computed independently of the project: each judge's true kappa is found by bisection on its noise,
its kappa measured on 1,000,000 simulated items with this file's own confusion-matrix kappa (not the project's),
and the project's kappa is checked against that one on the simulated data sets. Printed per kappa and pooled:
P(ever trusted | kappa <= bar - margin), P(ever untrusted | kappa >= bar + margin), each with its 95 %
Clopper-Pearson interval, the verdict's flips per sequence (changes between trusted and untrusted, and back to
pending), and the ratings to a first decision.

Then random order against the active queue on data where the judge's certainty varies: the people's mean to an
interval of a given width (10,000 data sets, with coverage), and the trust decision itself over frames of 1,800
judged items, in three designs on the same data (random order with today's rated-items rule, random order with
the frame estimators, the active queue with the frame estimators).

    python bench/bench_trust_decisions.py [--sims 1000] [--max-n 300] [--decision-sims 300]
    python bench/bench_trust_decisions.py --only-decision     # the last block alone (about 15 min on 2 cores)
    python bench/bench_trust_decisions.py --processes --sims 2000   # four kinds of data (bench/trust_processes.py)
    python bench/bench_trust_decisions.py --active-coverage --decision-sims 2000   # the queue's intervals (#72.4)
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats as sps

from eval_pipeline.agreement import active, ppi
from eval_pipeline.agreement import design as sampling
from eval_pipeline.agreement import sequential as sq

try:
    from bench import trust_processes
except ImportError:  # run as a script from bench/
    import trust_processes  # type: ignore[no-redef]

BAR_KAPPA, BAR_RHO, FLOOR = 0.6, 0.5, 30
CUTS = np.array([-1.3, -0.5, 0.3, 1.1])  # latent thresholds of the 1-5 scale (a mildly skewed distribution)
HUMAN_NOISE = 0.5


def on_scale(z: np.ndarray) -> np.ndarray:
    return np.searchsorted(CUTS, z).astype(float) + 1.0


def draw(rng: np.random.Generator, sims: int, n: int, judge_noise: float, raters: int) -> tuple[np.ndarray, ...]:
    """Judge scores and the people's mean, ``sims`` data sets of ``n`` items."""
    truth = rng.standard_normal((sims, n))
    judge = on_scale(truth + judge_noise * rng.standard_normal((sims, n)))
    people = np.mean([on_scale(truth + HUMAN_NOISE * rng.standard_normal((sims, n))) for _ in range(raters)], axis=0)
    return judge, people


def half_up(x: np.ndarray) -> np.ndarray:
    return np.clip(np.floor(x + 0.5), 1, 5)


kappa_independent = trust_processes.kappa_table  # quadratic kappa from the 5 x 5 table, this bench's own


def noise_for(kappa: float, raters: int, seed: int) -> float:
    lo, hi = 0.01, 4.0
    for _ in range(22):
        mid = (lo + hi) / 2
        j, p = draw(np.random.default_rng(seed), 1, 1_000_000, mid, raters)
        lo, hi = (mid, hi) if kappa_independent(j, half_up(p)) > kappa else (lo, mid)
    return (lo + hi) / 2


def old_rule(judge: np.ndarray, people: np.ndarray, n: int) -> np.ndarray:
    k, _ = sq.kappa_and_sigma(judge[:, :n] - 1, half_up(people[:, :n]) - 1)
    rho, *_ = sq.spearman_bounds(judge[:, :n], people[:, :n], sq.Rule())
    return np.where((k >= BAR_KAPPA) & (rho >= BAR_RHO), sq.TRUSTED, sq.UNTRUSTED)


def new_rule(judge: np.ndarray, people: np.ndarray, n: int, rule: sq.Rule) -> np.ndarray:
    _, klo, khi, _ = sq.kappa_bounds(judge[:, :n] - 1, half_up(people[:, :n]) - 1, rule)
    _, rlo, rhi, _ = sq.spearman_bounds(judge[:, :n], people[:, :n], rule)
    return sq.verdicts([(klo, khi, BAR_KAPPA), (rlo, rhi, BAR_RHO)], n, rule)


def summary(history: np.ndarray) -> dict[str, np.ndarray]:
    """Per sequence: ever trusted, ever untrusted, flips, returns to pending after a decision, first decision."""
    trusted, untrusted = history == sq.TRUSTED, history == sq.UNTRUSTED
    decided = trusted | untrusted
    first = np.where(decided.any(1), decided.argmax(1) + FLOOR, -1)
    flips, back = np.zeros(len(history)), np.zeros(len(history))
    for i, row in enumerate(history):
        kept = row[row != sq.PENDING]
        flips[i] = (kept[1:] != kept[:-1]).sum()
        if first[i] >= 0:
            after = row[first[i] - FLOOR :]
            back[i] = ((after[1:] == sq.PENDING) & (after[:-1] != sq.PENDING)).sum()
    return dict(trusted=trusted.any(1), untrusted=untrusted.any(1), flips=flips, back=back, first=first)


def ci(hits: int, total: int) -> str:
    lo, hi = sps.binomtest(hits, total).proportion_ci(method="exact") if total else (np.nan, np.nan)
    return f"{hits / total:6.1%} [{lo:5.1%}, {hi:5.1%}]" if total else "n/a"


def active_against_random(sims: int, seed: int, n_items: int = 600, width: float = 0.1) -> None:
    """Random order against the active queue (agreement.active), on data where the judge's certainty varies: a
    quarter of the items it is unsure of (people's scores spread 1.2 around its expected score), the rest it is
    sure of (0.25); the uncertainty it reports is the true one times a log-normal error (sd 0.3). Per data set
    and design: the ratings until the people's mean has a 95 % interval of half-width <= ``width``, and at 60 and
    120 ratings whether the interval covers the true mean of all items."""
    rng = np.random.default_rng(seed)
    sizes = np.arange(20, n_items + 1, 5)
    need = {"random": [], "active": []}
    cover = {(d, n): 0 for d in need for n in (60, 120)}
    for k in range(sims):
        f = np.clip(rng.normal(3.2, 0.8, n_items), 1, 5)
        unsure = rng.random(n_items) < 0.25
        s_true = np.where(unsure, 1.2, 0.25)
        y = f + s_true * rng.standard_normal(n_items)
        reported = s_true * np.exp(0.3 * rng.standard_normal(n_items))
        truth = float(y.mean())
        ids = [f"s{i}" for i in range(n_items)]
        for design in need:
            w = active.priorities(reported) if design == "active" else np.ones(n_items)
            queue, keys = sampling.order(ids, w, seed + k)
            at = np.array([int(sid[1:]) for sid in queue])
            reached = None
            for n in sizes:
                rated = at[:n]
                tau = float(keys[n]) if n < n_items else math.inf
                pi = sampling.inclusion(keys[:n], w[rated], tau)
                est = ppi.ipw_mean(f, f[rated], y[rated], pi)
                if reached is None and (est.ci_high - est.ci_low) / 2 <= width:
                    reached = int(n)
                if n in (60, 120):
                    cover[(design, int(n))] += int(est.ci_low <= truth <= est.ci_high)
            need[design].append(reached if reached is not None else n_items)
    r, a = np.median(need["random"]), np.median(need["active"])
    print(
        f"people's mean to a 95 % interval of half-width {width} ({sims} data sets of {n_items} items, a quarter "
        "of them where the judge is unsure):"
    )
    print(
        f"  ratings needed, median: random order {r:.0f}, active queue {a:.0f} ({1 - a / r:.0%} fewer); "
        f"mean {np.mean(need['random']):.1f} vs {np.mean(need['active']):.1f}"
    )
    for n in (60, 120):
        print(
            f"  coverage at {n} ratings: random {ci(cover[('random', n)], sims)}, "
            f"active {ci(cover[('active', n)], sims)}"
        )


def draw_varying(rng: np.random.Generator, sims: int, n: int, c: float) -> tuple[np.ndarray, ...]:
    """Data where the judge's certainty varies, on label positions 0-4: the judge's expected position f, its written
    score round(f); people's position round(f + s e), s = c on a quarter of the items (the judge unsure) and 0.2 c
    on the rest. The judge reports a distribution over the scale, normal around f with s times a log-normal error
    (sd 0.3; a judge whose stated certainty is only roughly right): its mean and second moment are its
    predictions of people's position, and their variance its uncertainty."""
    f = np.clip(rng.normal(2.2, 0.9, (sims, n)), 0, 4)
    s = np.where(rng.random((sims, n)) < 0.25, 1.0, 0.2) * c
    judge = np.clip(np.floor(f + 0.5), 0, 4)
    people = np.clip(np.floor(f + s * rng.standard_normal((sims, n)) + 0.5), 0, 4)
    stated = s * np.exp(0.3 * rng.standard_normal((sims, n)))
    levels = np.arange(5.0)
    edges = np.concatenate([[-np.inf], levels[:-1] + 0.5, [np.inf]])
    prob = np.diff(sps.norm.cdf((edges - f[..., None]) / stated[..., None]), axis=-1)
    mean, second = prob @ levels, prob @ (levels**2)
    return judge, people, mean, second, np.maximum(second - mean**2, 0.0), prob


def varying_c_for(kappa: float, seed: int) -> float:
    lo, hi = 0.01, 12.0
    for _ in range(22):
        mid = (lo + hi) / 2
        j, p, *_ = draw_varying(np.random.default_rng(seed), 1, 1_000_000, mid)
        lo, hi = (mid, hi) if kappa_independent(j + 1, p + 1) > kappa else (lo, mid)
    return (lo + hi) / 2


def decision_random_against_active(sims: int, seed: int, max_n: int, rule: sq.Rule, n_items: int = 1800) -> None:
    """The trust decision, random order against the active queue, re-decided after every rating from the floor to
    ``max_n``, on ``draw_varying`` data (frames of ``n_items`` judged items). Three designs on the same data sets:
    today's rule on a random order (kappa and Spearman of the rated items), the active-inference kappa
    and Spearman (``sequential.ppi_kappa_bounds``, ``ppi_spearman_bounds``, over the whole frame, the judge's
    distribution as its prediction) on the same random order, and the same estimators on the active queue's order
    (``active.priorities`` of ``active.kappa_variance_shares``, as the annotate plan orders a checkpoint)."""
    print(
        f"trust decided after every rating, random order against the active queue ({sims} frames of {n_items} "
        "items per judge, a quarter of them where the judge is unsure):"
    )
    print(
        f"{'kappa':>6} {'design':>14} {'ever trusted':>22} {'ever untrusted':>22} {'flips':>6} "
        f"{'ratings to decide (median)':>27} {'undecided':>9}"
    )
    ids = [f"s{i}" for i in range(n_items)]
    designs = ("random", "random+ppi", "active+ppi")
    firsts: dict[str, list[np.ndarray]] = {d: [] for d in designs}
    wrong = {d: [0, 0, 0, 0] for d in designs}  # trusted below, sequences below, untrusted above, sequences above
    rng = np.random.default_rng(seed)
    for kappa in (0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80):
        c = varying_c_for(kappa, seed)
        judge, people, mean, second, var, prob = draw_varying(rng, sims, n_items, c)
        rows = np.arange(sims)[:, None]
        for design in designs:
            if design == "active+ppi":  # what the annotate plan does (active.decision_uncertainty), per frame
                shares = active.kappa_variance_shares(judge, mean, var, BAR_KAPPA)
                assert shares is not None
                weights = np.stack([active.priorities(np.sqrt(e2)) for e2 in shares])
            else:
                weights = None
            orders, keys = [], []
            for k in range(sims):
                w = weights[k] if weights is not None else np.ones(n_items)
                queue, key = sampling.order(ids, w, seed + k)
                orders.append([int(x[1:]) for x in queue])
                keys.append(key)
            at, key = np.array(orders), np.array(keys)
            history = []
            for n in range(FLOOR, max_n + 1):
                rated = at[:, :n]
                j, p = judge[rows, rated], people[rows, rated]
                if design == "random":
                    _, klo, khi, _ = sq.kappa_bounds(j, p, rule)
                    _, rlo, rhi, _ = sq.spearman_bounds(j, p, rule)
                else:
                    w = weights[rows, rated] if weights is not None else np.ones_like(j)
                    pi = np.minimum(1.0, key[:, n : n + 1] * w)
                    _, klo, khi, _ = sq.ppi_kappa_bounds(judge, mean, second, rated, p, pi, rule)
                    _, rlo, rhi, _ = sq.ppi_spearman_bounds(judge, prob, np.arange(5.0), rated, p, pi, rule)
                history.append(sq.verdicts([(klo, khi, BAR_KAPPA), (rlo, rhi, BAR_RHO)], n, rule))
            s = summary(np.stack(history, axis=1))
            decided = s["first"][s["first"] >= 0]
            if kappa <= BAR_KAPPA - rule.margin + 1e-9:
                wrong[design][0] += int(s["trusted"].sum())
                wrong[design][1] += sims
                firsts[design].append(np.where(s["first"] >= 0, s["first"], max_n + 1))
            elif kappa >= BAR_KAPPA + rule.margin - 1e-9:
                wrong[design][2] += int(s["untrusted"].sum())
                wrong[design][3] += sims
                firsts[design].append(np.where(s["first"] >= 0, s["first"], max_n + 1))
            print(
                f"{kappa:6.2f} {design:>14} {ci(int(s['trusted'].sum()), sims):>22} "
                f"{ci(int(s['untrusted'].sum()), sims):>22} {s['flips'].mean():6.3f} "
                f"{np.median(decided) if len(decided) else float('nan'):27.0f} {1 - len(decided) / sims:9.1%}"
            )
    base = np.concatenate(firsts["random"])
    for design in designs:
        t, nt, u, nu = wrong[design]
        first = np.concatenate(firsts[design])
        print(
            f"{design:>10}: P(ever trusted | kappa <= {BAR_KAPPA - rule.margin:.2f}) {ci(t, nt)}; "
            f"P(ever untrusted | kappa >= {BAR_KAPPA + rule.margin:.2f}) {ci(u, nu)}; ratings to a decision outside "
            f"the margin (undecided at {max_n} counted as {max_n + 1}): median {np.median(first):.0f}, mean "
            f"{first.mean():.1f} ({1 - first.mean() / base.mean():.0%} fewer than random order, by the mean)"
        )


def active_coverage(sims: int, seed: int, n_items: int = 1800) -> None:
    """#72.4: fixed-size 95 % intervals under the active queue, at 50 and 300 ratings, on ``draw_varying`` data
    (frames of ``n_items`` judged items ordered by the queue's decision priorities, as the annotate plan orders a
    checkpoint): kappa and Spearman over the frame (estimate -+ 1.96 sigma / sqrt(n) on the z scale, sigma from
    ``sequential.ppi_kappa_bounds`` and ``ppi_spearman_bounds``) against the process's true values (1,000,000
    items, this file's own kappa and scipy's Spearman), and the people's mean (``ppi.ipw_mean``) against the frame's
    own mean. Each with its 95 % Clopper-Pearson interval and the share missed on each side."""
    print(f"fixed-size 95 % intervals under the active queue ({sims} frames of {n_items} items per kappa):")
    print(
        f"{'kappa':>6} {'n':>4} {'kappa covers':>22} {'(above, below)':>15} {'Spearman covers':>22} "
        f"{'(above, below)':>15} {'mean covers':>22}"
    )
    ids = [f"s{i}" for i in range(n_items)]
    rows = np.arange(sims)[:, None]
    z = sps.norm.ppf(0.975)
    for kappa in (0.45, 0.55, 0.65, 0.75, 0.80):
        c = varying_c_for(kappa, seed)
        j1, p1, *_ = draw_varying(np.random.default_rng(seed + 1), 1, 1_000_000, c)
        true_k, true_r = kappa_independent(j1 + 1, p1 + 1), float(sps.spearmanr(j1[0], p1[0]).statistic)
        judge, people, mean, second, var, prob = draw_varying(np.random.default_rng(seed + 2), sims, n_items, c)
        shares = active.kappa_variance_shares(judge, mean, var, BAR_KAPPA)
        assert shares is not None
        weights = np.stack([active.priorities(np.sqrt(e2)) for e2 in shares])
        orders, keys = [], []
        for k in range(sims):
            queue, key = sampling.order(ids, weights[k], seed + k)
            orders.append([int(x[1:]) for x in queue])
            keys.append(key)
        at, key = np.array(orders), np.array(keys)
        for n in (50, 300):
            rated = at[:, :n]
            y = people[rows, rated]
            pi = np.minimum(1.0, key[:, n : n + 1] * weights[rows, rated])
            cells = []
            for bounds, args, truth in (
                (sq.ppi_kappa_bounds, (judge, mean, second), true_k),
                (sq.ppi_spearman_bounds, (judge, prob, np.arange(5.0)), true_r),
            ):
                est, _, _, sigma = bounds(*args, rated, y, pi, sq.Rule())
                centre, half = np.arctanh(np.clip(est, -0.999999, 0.999999)), z * sigma / math.sqrt(n)
                above, below = np.tanh(centre - half) > truth, np.tanh(centre + half) < truth
                cells += [ci(int((~above & ~below).sum()), sims), f"({above.mean():.1%}, {below.mean():.1%})"]
            mean_covers = 0
            for k in range(sims):
                est = ppi.ipw_mean(mean[k], mean[k, rated[k]], y[k], pi[k])
                mean_covers += int(est.ci_low <= people[k].mean() <= est.ci_high)
            print(
                f"{kappa:6.2f} {n:4d} {cells[0]:>22} {cells[1]:>15} {cells[2]:>22} {cells[3]:>15} "
                f"{ci(mean_covers, sims):>22}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--max-n", type=int, default=300)
    ap.add_argument("--active-sims", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--decision-sims", type=int, default=300, help="frames per judge for the active decision block")
    ap.add_argument("--only-decision", action="store_true", help="run the active decision block alone")
    ap.add_argument(
        "--processes", action="store_true", help="the four kinds of data alone (bench/trust_processes.py, #72)"
    )
    ap.add_argument("--active-coverage", action="store_true", help="the active queue's fixed-size intervals (#72.4)")
    args = ap.parse_args()
    rule = sq.Rule(min_samples=FLOOR)
    started = time.perf_counter()
    if args.processes:
        trust_processes.run(args.sims, args.max_n, args.seed, rule)
        return
    if args.active_coverage:
        active_coverage(args.decision_sims, args.seed)
        print(f"({time.perf_counter() - started:.0f} s)")
        return
    if args.only_decision:
        decision_random_against_active(args.decision_sims, args.seed, args.max_n, rule)
        print(f"({time.perf_counter() - started:.0f} s)")
        return
    kappas = [0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80]
    pooled: dict[tuple[str, str], list[dict[str, np.ndarray]]] = {}
    print(
        f"bar kappa_q {BAR_KAPPA}, spearman {BAR_RHO}; margin {rule.margin}, alpha {rule.alpha}; {args.sims} "
        f"sequences of {args.max_n} ratings each, decided after every rating from {FLOOR}"
    )
    print(
        f"{'kappa':>6} {'raters':>6} {'rule':>4} {'ever trusted':>22} {'ever untrusted':>22} {'flips':>6} "
        f"{'back':>5} {'ratings to decide (median)':>27} {'undecided':>9}"
    )
    rng = np.random.default_rng(args.seed)
    for raters in (1, 2):
        for kappa in kappas:
            noise = noise_for(kappa, raters, args.seed + raters)
            judge, people = draw(rng, args.sims, args.max_n, noise, raters)
            # the project's kappa is this file's on the same data
            assert (
                abs(
                    sq.kappa_and_sigma(judge[0] - 1, half_up(people[0]) - 1)[0]
                    - kappa_independent(judge[0], half_up(people[0]))
                )
                < 1e-12
            )
            histories = {
                "old": np.stack([old_rule(judge, people, n) for n in range(FLOOR, args.max_n + 1)], axis=1),
                "new": np.stack([new_rule(judge, people, n, rule) for n in range(FLOOR, args.max_n + 1)], axis=1),
            }
            for name, history in histories.items():
                s = summary(history)
                side = (
                    "low"
                    if kappa <= BAR_KAPPA - rule.margin + 1e-9
                    else "high"
                    if kappa >= BAR_KAPPA + rule.margin - 1e-9
                    else "zone"
                )
                pooled.setdefault((name, side), []).append(s)
                decided = s["first"][s["first"] >= 0]
                print(
                    f"{kappa:6.2f} {raters:6d} {name:>4} {ci(int(s['trusted'].sum()), args.sims):>22} "
                    f"{ci(int(s['untrusted'].sum()), args.sims):>22} {s['flips'].mean():6.3f} {s['back'].mean():5.2f} "
                    f"{np.median(decided) if len(decided) else float('nan'):27.0f} {1 - len(decided) / args.sims:9.1%}"
                )
    print()
    for name in ("old", "new"):
        low, high = pooled[(name, "low")], pooled[(name, "high")]
        every = [s for side in ("low", "zone", "high") for s in pooled.get((name, side), [])]
        t = sum(int(s["trusted"].sum()) for s in low)
        u = sum(int(s["untrusted"].sum()) for s in high)
        n_low, n_high = len(low) * args.sims, len(high) * args.sims
        flips = np.concatenate([s["flips"] for s in every]).mean()
        back = np.concatenate([s["back"] for s in every]).mean()
        first = np.concatenate([s["first"] for s in low + high])
        print(
            f"{name} rule: P(ever trusted | kappa <= {BAR_KAPPA - rule.margin:.2f}) {ci(t, n_low)}; "
            f"P(ever untrusted | kappa >= {BAR_KAPPA + rule.margin:.2f}) {ci(u, n_high)}; "
            f"flips per sequence {flips:.3f}, back to pending {back:.3f}; "
            f"median ratings to a decision outside the margin "
            f"{np.median(first[first >= 0]):.0f}"
        )
    print()
    active_against_random(args.active_sims, args.seed)
    print()
    decision_random_against_active(args.decision_sims, args.seed, args.max_n, rule)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
