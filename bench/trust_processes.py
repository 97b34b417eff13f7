"""Trust decided again after every rating, on four kinds of data unlike each other (#72.8).

The processes (1-5 scale; the people's score a latent truth plus their own noise, cut at fixed thresholds; the
judge's noise set per process so its true quadratic kappa against the people's rounded mean is the target):

* ``skewed``: prevalence skew (most items at 4-5) and the judge's errors largest at the extremes;
* ``biased``: a judge that scores 0.45 latent units high: good rank agreement, kappa lowered by the shift;
* ``disagreeing``: two raters a person each, one 0.35 lower and one 0.35 higher than the truth, noisier than
  elsewhere; the people's score is their mean;
* ``heavy``: heavy-tailed item difficulty: the judge's noise a Student t with 2 degrees of freedom.

Everything the decision is checked against is this file's own: the true kappa by bisection on the judge's noise,
measured on 400,000 items with its own confusion-matrix kappa; the true Spearman by ``scipy.stats.spearmanr`` on the
same items; the held rule (running intersection, first crossing held, re-decided where the intersection empties)
re-implemented here over all sequences at once and checked against ``sequential.held`` on a sample of them. The
project's code gives only the confidence sequences' bounds at each size (``sequential.kappa_bounds`` and
``spearman_bounds``), which is what is under test.

Per process and kappa: per-side sequence misses (the share of sequences whose kappa, or Spearman, CS lay wholly
above the truth at some size from the floor to ``max_n``, and wholly below), P(ever trusted), P(ever untrusted),
flips between trusted and untrusted, returns to pending after a decision, and ratings to the first decision, for
the rule as it was before #72 (``today``: no small-sample widening, Spearman's sigma Bonett & Wright's
normal-theory value, decided on the current ratings alone), the
rule with the widening decided on the current ratings alone (``current``), and the held rule (``held``). The
misses are the sequences' as the project builds them now (with the widening).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from scipy import stats as sps

from eval_pipeline.agreement import sequential as sq

BAR_KAPPA, BAR_RHO, FLOOR = 0.6, 0.5, 30
PROCESSES = ("skewed", "biased", "disagreeing", "heavy")
KAPPAS = (0.45, 0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80)
EVEN_CUTS = np.array([-1.3, -0.5, 0.3, 1.1])
SKEWED_CUTS = np.array([-2.2, -1.6, -0.9, -0.1])  # about 46 % of items at 5, 29 % at 4
TRUTH_ITEMS = 400_000

Draw = Callable[[np.random.Generator, int, int, float], tuple[np.ndarray, np.ndarray]]


def _scale(z: np.ndarray, cuts: np.ndarray = EVEN_CUTS) -> np.ndarray:
    return np.searchsorted(cuts, z).astype(float) + 1.0


def _skewed(rng: np.random.Generator, sims: int, n: int, s: float) -> tuple[np.ndarray, np.ndarray]:
    t = rng.standard_normal((sims, n))
    judge = _scale(t + s * (0.4 + np.abs(t)) * rng.standard_normal((sims, n)), SKEWED_CUTS)
    return judge, _scale(t + 0.45 * rng.standard_normal((sims, n)), SKEWED_CUTS)


def _biased(rng: np.random.Generator, sims: int, n: int, s: float) -> tuple[np.ndarray, np.ndarray]:
    t = rng.standard_normal((sims, n))
    return _scale(t + 0.45 + s * rng.standard_normal((sims, n))), _scale(t + 0.45 * rng.standard_normal((sims, n)))


def _disagreeing(rng: np.random.Generator, sims: int, n: int, s: float) -> tuple[np.ndarray, np.ndarray]:
    t = rng.standard_normal((sims, n))
    one = _scale(t - 0.35 + 0.7 * rng.standard_normal((sims, n)))
    two = _scale(t + 0.35 + 0.7 * rng.standard_normal((sims, n)))
    return _scale(t + s * rng.standard_normal((sims, n))), (one + two) / 2.0


def _heavy(rng: np.random.Generator, sims: int, n: int, s: float) -> tuple[np.ndarray, np.ndarray]:
    t = rng.standard_normal((sims, n))
    return _scale(t + s * rng.standard_t(2, (sims, n))), _scale(t + 0.45 * rng.standard_normal((sims, n)))


DRAWS: dict[str, Draw] = {"skewed": _skewed, "biased": _biased, "disagreeing": _disagreeing, "heavy": _heavy}


def half_up(x: np.ndarray) -> np.ndarray:
    return np.clip(np.floor(x + 0.5), 1, 5)


def kappa_table(a: np.ndarray, b: np.ndarray) -> float:
    """Quadratic kappa from the 5 x 5 table of observed against chance-expected shares."""
    ia, ib = (a.ravel() - 1).astype(int), (b.ravel() - 1).astype(int)
    obs = np.bincount(ia * 5 + ib, minlength=25).reshape(5, 5) / len(ia)
    exp = np.outer(obs.sum(1), obs.sum(0))
    i, j = np.indices((5, 5))
    w = (i - j) ** 2
    return float(1 - (w * obs).sum() / (w * exp).sum())


def truth(process: str, kappa: float, seed: int) -> tuple[float, float, float]:
    """The judge's noise giving true kappa ``kappa`` (bisection), and the true kappa and Spearman it gives."""
    draw = DRAWS[process]
    lo, hi = 0.0, 6.0
    for _ in range(24):
        mid = (lo + hi) / 2
        j, p = draw(np.random.default_rng(seed), 1, TRUTH_ITEMS, mid)
        lo, hi = (mid, hi) if kappa_table(j, half_up(p)) > kappa else (lo, mid)
    s = (lo + hi) / 2
    j, p = draw(np.random.default_rng(seed + 1), 1, TRUTH_ITEMS, s)
    return s, kappa_table(j, half_up(p)), float(sps.spearmanr(j[0], p[0]).statistic)  # type: ignore[attr-defined]


def estimates(judge: np.ndarray, people: np.ndarray, max_n: int, rule: sq.Rule) -> dict[str, np.ndarray]:
    """The project's estimates and sigmas (on the z scale) of every sequence at every size from the floor:
    arrays (sims, sizes). The bounds of any rule follow from them (``bounds``)."""
    out: dict[str, list[np.ndarray]] = {"k": [], "k_sigma": [], "r": [], "r_sigma": []}
    for n in range(FLOOR, max_n + 1):
        k, _, _, k_sigma = sq.kappa_bounds(judge[:, :n] - 1, half_up(people[:, :n]) - 1, rule)
        r, _, _, r_sigma = sq.spearman_bounds(judge[:, :n], people[:, :n], rule)
        for key, v in zip(out, (k, k_sigma, r, r_sigma)):
            out[key].append(v)
    return {k: np.stack(v, axis=1) for k, v in out.items()}


def bounds(e: dict[str, np.ndarray], rule: sq.Rule) -> dict[str, np.ndarray]:
    """Each CS's bounds under ``rule``: tanh(z -+ sigma * radius(t)), t = n for kappa, n - 3 for Spearman (the
    construction ``sequential`` documents; checked against the project's bounds in ``run``)."""
    n = np.arange(FLOOR, FLOOR + e["k"].shape[1])
    out = {}
    for name, t in (("k", n), ("r", n - 3)):
        z = np.arctanh(np.clip(e[name], -0.999999, 0.999999))
        half = e[f"{name}_sigma"] * rule.radius(t)[None, :]
        out[f"{name}_lo"], out[f"{name}_hi"] = np.tanh(z - half), np.tanh(z + half)
    return out


def _verdict(k_lo, k_hi, r_lo, r_hi, margin: float) -> np.ndarray:  # noqa: ANN001 - arrays of one shape
    """0 pending, 1 trusted, 2 untrusted (NaN bounds nothing: never trusted, never untrusted by it)."""
    trusted = (k_lo >= BAR_KAPPA - margin) & (r_lo >= BAR_RHO - margin)
    below = (k_hi < BAR_KAPPA + margin) | (r_hi < BAR_RHO + margin)
    return np.where(trusted, 1, np.where(below, 2, 0))


def current_rule(b: dict[str, np.ndarray], margin: float) -> np.ndarray:
    """The verdict at each size on that size's bounds alone: (sims, sizes)."""
    return _verdict(b["k_lo"], b["k_hi"], b["r_lo"], b["r_hi"], margin)


def held_rule(b: dict[str, np.ndarray], margin: float) -> tuple[np.ndarray, np.ndarray]:
    """The held rule, all sequences at once: the verdict shown at each size and the restarts (an intersection
    emptied, counted afresh from there). Independent of ``sequential.held``; the same rule."""
    lo_k, hi_k = np.nan_to_num(b["k_lo"], nan=-np.inf), np.nan_to_num(b["k_hi"], nan=np.inf)
    lo_r, hi_r = np.nan_to_num(b["r_lo"], nan=-np.inf), np.nan_to_num(b["r_hi"], nan=np.inf)
    sims, sizes = lo_k.shape
    run = [lo_k[:, 0].copy(), hi_k[:, 0].copy(), lo_r[:, 0].copy(), hi_r[:, 0].copy()]
    shown = np.zeros((sims, sizes), int)
    restarts = np.zeros((sims, sizes), bool)
    state = np.zeros(sims, int)
    for i in range(sizes):
        if i:
            run = [np.maximum(run[0], lo_k[:, i]), np.minimum(run[1], hi_k[:, i]),
                   np.maximum(run[2], lo_r[:, i]), np.minimum(run[3], hi_r[:, i])]  # fmt: skip
        empty = (run[0] > run[1]) | (run[2] > run[3])
        if empty.any():
            for r, src in zip(run, (lo_k, hi_k, lo_r, hi_r)):
                r[empty] = src[empty, i]
            restarts[:, i] = empty
            state[empty] = 0
        now = _verdict(run[0], run[1], run[2], run[3], margin)
        state = np.where(state == 0, now, state)
        shown[:, i] = state
    return shown, restarts


def summary(history: np.ndarray) -> dict[str, np.ndarray]:
    """Per sequence: ever trusted, ever untrusted, flips, returns to pending after a decision, first decision."""
    decided = history != 0
    first = np.where(decided.any(1), decided.argmax(1) + FLOOR, -1)
    flips = np.zeros(len(history))
    back = np.zeros(len(history))
    for i, row in enumerate(history):
        kept = row[row != 0]
        flips[i] = (kept[1:] != kept[:-1]).sum()
        back[i] = ((row[1:] == 0) & (row[:-1] != 0)).sum()
    return dict(trusted=(history == 1).any(1), untrusted=(history == 2).any(1), flips=flips, back=back, first=first)


def _check_against_project(b: dict[str, np.ndarray], shown: np.ndarray, rule: sq.Rule, count: int = 40) -> None:
    """``sequential.held`` gives this file's held verdict at the last size, on the first ``count`` sequences."""
    sizes = np.arange(FLOOR, FLOOR + shown.shape[1])
    names = {0: sq.PENDING, 1: sq.TRUSTED, 2: sq.UNTRUSTED}
    for i in range(min(count, len(shown))):
        h = sq.held([(b["k_lo"][i], b["k_hi"][i], BAR_KAPPA), (b["r_lo"][i], b["r_hi"][i], BAR_RHO)], sizes, rule)
        assert h.verdict == names[int(shown[i, -1])], (i, h, shown[i, -1])


def _share(hits: np.ndarray) -> str:
    k, n = int(hits.sum()), len(hits)
    lo, hi = sps.binomtest(k, n).proportion_ci(method="exact") if n else (math.nan, math.nan)
    return f"{k / n:6.2%} [{lo:5.2%},{hi:5.2%}]"


def run(sims: int, max_n: int, seed: int, rule: sq.Rule, processes: tuple[str, ...] = PROCESSES) -> None:
    started = time.perf_counter()
    print(
        f"four processes: {sims} sequences of {max_n} ratings per judge, decided after every rating from {FLOOR}; "
        f"bar kappa_q {BAR_KAPPA}, spearman {BAR_RHO}, margin {rule.margin}, alpha {rule.alpha} (alpha/2 = "
        f"{rule.alpha / 2:.1%} a side)"
    )
    print(
        f"{'process':>11} {'kappa':>5} {'rho':>5} | {'kappa CS above':>22} {'kappa CS below':>22} "
        f"{'rho CS above':>22} {'rho CS below':>22} | {'rule':>7} {'ever trusted':>22} {'ever untrusted':>22} "
        f"{'flips':>6} {'back':>5} {'to decide':>9}"
    )
    totals: dict[tuple[str, str], list[np.ndarray]] = {}
    rng = np.random.default_rng(seed)
    for p_i, process in enumerate(processes):
        for k_i, target in enumerate(KAPPAS):
            s, kappa, rho = truth(process, target, seed + 100 * p_i + k_i)
            judge, people = DRAWS[process](rng, sims, max_n, s)
            e = estimates(judge, people, max_n, rule)
            # before #72: no small-sample widening, and Spearman's sigma Bonett & Wright's normal-theory value
            before = {**e, "r_sigma": np.sqrt(1.0 + e["r"] ** 2 / 2.0)}
            b, today = bounds(e, rule), bounds(before, replace(rule, small_n=0.0))
            for n in (FLOOR, max_n):  # these bounds are the project's
                _, k_lo, k_hi, _ = sq.kappa_bounds(judge[:, :n] - 1, half_up(people[:, :n]) - 1, rule)
                assert np.allclose(np.c_[k_lo, k_hi], np.c_[b["k_lo"][:, n - FLOOR], b["k_hi"][:, n - FLOOR]],
                                   equal_nan=True)  # fmt: skip
            misses = {
                "k_above": (b["k_lo"] > kappa).any(1), "k_below": (b["k_hi"] < kappa).any(1),
                "r_above": (b["r_lo"] > rho).any(1), "r_below": (b["r_hi"] < rho).any(1),
            }  # fmt: skip
            for key, hits in misses.items():
                totals.setdefault(("miss", key), []).append(hits)
            shown, _ = held_rule(b, rule.margin)
            _check_against_project(b, shown, rule)
            rules = (("today", current_rule(today, rule.margin)), ("current", current_rule(b, rule.margin)),
                     ("held", shown))  # fmt: skip
            for name, history in rules:
                sm = summary(history)
                low = kappa <= BAR_KAPPA - rule.margin + 0.005
                high = kappa >= BAR_KAPPA + rule.margin - 0.005 and rho >= BAR_RHO + rule.margin
                if low:
                    totals.setdefault((name, "false_trust"), []).append(sm["trusted"])
                if high:
                    totals.setdefault((name, "false_untrust"), []).append(sm["untrusted"])
                if low or high:
                    totals.setdefault((name, "first"), []).append(sm["first"])
                totals.setdefault((name, "flips"), []).append(sm["flips"])
                totals.setdefault((name, "back"), []).append(sm["back"])
                decided = sm["first"][sm["first"] >= 0]
                print(
                    f"{process:>11} {kappa:5.3f} {rho:5.3f} | {_share(misses['k_above']):>22} "
                    f"{_share(misses['k_below']):>22} {_share(misses['r_above']):>22} {_share(misses['r_below']):>22} "
                    f"| {name:>7} {_share(sm['trusted']):>22} {_share(sm['untrusted']):>22} "
                    f"{sm['flips'].mean():6.3f} {sm['back'].mean():5.2f} "
                    f"{np.median(decided) if len(decided) else math.nan:9.0f}"
                )
    print()
    for key in ("k_above", "k_below", "r_above", "r_below"):
        per = [h.mean() for h in totals[("miss", key)]]
        print(f"sequence misses {key}: pooled {_share(np.concatenate(totals[('miss', key)]))}, worst {max(per):.2%}")
    for name in ("today", "current", "held"):
        first = np.concatenate(totals[(name, "first")])
        print(
            f"{name} rule: P(ever trusted | kappa <= {BAR_KAPPA - rule.margin:.2f}) "
            f"{_share(np.concatenate(totals[(name, 'false_trust')]))}; P(ever untrusted | kappa, rho >= bar + "
            f"margin) {_share(np.concatenate(totals[(name, 'false_untrust')]))}; flips per sequence "
            f"{np.concatenate(totals[(name, 'flips')]).mean():.4f}, returns to pending "
            f"{np.concatenate(totals[(name, 'back')]).mean():.4f}; ratings to a first decision outside the margin: "
            f"median {np.median(first[first >= 0]):.0f}, mean {first[first >= 0].mean():.1f}, undecided at "
            f"{max_n} {np.mean(first < 0):.1%}"
        )
    print(f"({time.perf_counter() - started:.0f} s)")
