"""Anytime-valid decisions on a judge's agreement with people: confidence sequences for quadratic kappa and
Spearman, the trust rule they decide, and how many more ratings would likely settle it.

A confidence sequence (CS) at level ``alpha`` covers the true value at *every* sample size at once with
probability at least ``1 - alpha``, so a verdict decided again after every rating keeps its error rate however
often it is looked at (a fixed-n interval looked at after every rating does not). The construction is the
asymptotic CS of Waudby-Smith, Arnold, Wu, Wang & Ramdas (2024, "Time-uniform central limit theory and asymptotic
confidence sequences", Ann. Statist.; their R function ``std_conjmix_margin``): estimate ± sigma * margin(t), with
the conjugate-mixture margin

    margin(t) = sqrt(2 (t rho² + 1) / (t² rho²) * log(sqrt(t rho² + 1) / alpha)),
    rho² = (-2 log alpha + log(-2 log alpha + 1)) / t_opt          (tightest at t = t_opt, ``design_n``)

applied to an asymptotically linear estimator through its influence function (the delta method):

* quadratic kappa over label positions equals Lin's concordance of the positions with n denominators,
  ``2 s_xy / (s_xx + s_yy + (m_x - m_y)²)``, so its influence value at item i is
  ``(2 (u_i v_i - s_xy) - kappa ((u_i² - s_xx) + (v_i² - s_yy) + 2 d (u_i - v_i))) / D`` with ``u, v`` the
  centred positions, ``d = m_x - m_y`` and ``D`` the denominator; sigma is the root mean square of those values,
  taken to Lin's (1989) z-transform ``atanh(kappa)`` (sigma / (1 - kappa²)), where the bounds are built and
  mapped back with tanh (the untransformed CS missed on its upper side about twice as often as stated at
  30-100 ratings). The estimate is exactly ``stats.cohen_kappa(..., "quadratic")`` on the same rounded scores.
* Spearman through Fisher's z at ``t = n - 3``: sigma from its influence function (``_spearman_influence``: on
  tied, discrete scales the statistic's own variance), taken to the z scale (sigma / (1 - r²)) and never below
  Bonett & Wright's (2000) normal-theory ``sqrt(1 + r²/2)`` (which alone was 30 % short in variance on five-level
  data, #72), and the bounds are mapped back with tanh.

The construction is asymptotic: at the sizes people rate (30-300) it missed on one side more often than alpha / 2
on some kinds of data (skewed prevalence: up to 6.7 % of sequences lay wholly below the true kappa at some size;
bench/trust_processes.py), the misses almost all below 60 ratings, where sigma is estimated from few items. So the
radius is widened by ``sqrt(1 + (small_n / t)²)`` (``Rule.radius``; ``small_n`` 30: x1.41 at 30 ratings, x1.12 at 60,
x1.04 at 100, x1.005 at 300), a documented correction whose per-side coverage is measured on four kinds of data
(docs/trust.md), not a finite-sample proof.

The rule (``decide``), with the bar ``b``, the indifference ``margin`` m and the CS of each statistic:

* ``trusted`` when every statistic's lower bound is at least ``b - m``;
* ``untrusted`` when some statistic's upper bound is below ``b + m`` and it is not trusted;
* ``pending`` otherwise, and always below the rubric's ``min_samples`` (a floor, not the rule).

So a judge whose true kappa is at or below ``b - m`` is called trusted, at any moment of any rating sequence,
only when a CS missed: at most ``alpha / 2`` (one side). One whose true kappa and Spearman are at or above
``b + m`` is called untrusted at most ``alpha`` of the time (either statistic's upper side). Between the two
(within the margin of the bar) either verdict is acceptable. Measured by ``bench/bench_trust_decisions.py``.

``needed`` (``ratings_needed``) projects the current estimates and sigmas forward: the fewest more rated samples
at which the CS, at today's estimate, would clear the side of the bar the estimate is on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from eval_pipeline.agreement.design import effective_size, hajek_variance, small_sample_factor
from eval_pipeline.core.distributions import average_ranks

TRUSTED, UNTRUSTED, PENDING = "trusted", "untrusted", "pending"
DEFAULT_ALPHA, DEFAULT_MARGIN, DEFAULT_DESIGN_N = 0.05, 0.05, 100
# the small-sample widening (``Rule.radius``): calibrated on bench/trust_processes.py's four kinds of data
DEFAULT_SMALL_N = 30.0
NEEDED_CAP = 100_000  # a projection past this many more ratings is reported as this many


@dataclass(frozen=True)
class Rule:
    """How trust is decided: error rate, indifference margin around each bar, the size the CS is tightest at,
    and the floor below which nothing is decided."""

    alpha: float = DEFAULT_ALPHA
    margin: float = DEFAULT_MARGIN
    design_n: int = DEFAULT_DESIGN_N
    min_samples: int = 30
    small_n: float = DEFAULT_SMALL_N

    def radius(self, t: np.ndarray | float) -> np.ndarray:
        """The CS's half-width per unit sigma at size(s) ``t``: the conjugate-mixture ``margin``, widened by the
        small-sample factor ``sqrt(1 + (small_n / t)²)`` (see the module's docstring)."""
        t = np.asarray(t, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            widen = np.sqrt(1.0 + (self.small_n / np.maximum(t, 1e-12)) ** 2)
        return np.asarray(margin(t, self.alpha, self.design_n) * widen, float)


def _rho2(alpha: float, design_n: int) -> float:
    la = -2.0 * math.log(alpha)
    return (la + math.log(la + 1.0)) / max(design_n, 1)


def margin(t: np.ndarray | float, alpha: float, design_n: int) -> np.ndarray:
    """The unit-variance conjugate-mixture margin at sample size(s) ``t`` (inf where t < 1)."""
    t = np.asarray(t, float)
    r2 = _rho2(alpha, design_n)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sqrt(2.0 * (t * r2 + 1.0) / (t * t * r2) * np.log(np.sqrt(t * r2 + 1.0) / alpha))
    return np.where(t >= 1, out, np.inf)


@dataclass(frozen=True)
class Sequence:
    """One statistic's confidence sequence at its current size: ``estimate`` within [``low``, ``high``];
    ``sigma`` the per-item standard deviation, on Fisher's z scale, it was built from."""

    estimate: float
    low: float
    high: float
    sigma: float
    n: int
    offset: int = 0  # the CS's t is n - offset (Spearman's Fisher z: 3)

    @property
    def defined(self) -> bool:
        return not (math.isnan(self.estimate) or math.isnan(self.sigma))


def _size(p: np.ndarray) -> np.ndarray:
    """The number of items in each data set: those with a share (an item of weight 0 is not in it)."""
    return np.asarray((p > 0).sum(axis=-1), float)


def _normalised(w: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """Weights as shares summing to 1 along the last axis (equal shares without weights)."""
    if w is None:
        return np.full(shape, 1.0 / shape[-1])
    w = np.broadcast_to(np.asarray(w, float), shape)
    return np.asarray(w / w.sum(axis=-1, keepdims=True), float)


def kappa_and_sigma(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Quadratic kappa of label positions ``x`` and ``y`` (along the last axis) and the standard deviation of its
    influence values (with ``weights``, inverse inclusion probabilities: the weighted moments' kappa and
    ``sqrt(n * sum(p_i² IF_i²))``, ``p`` the weights as shares, which is the same as without at equal weights);
    NaN where kappa is undefined (no disagreement possible by chance)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    p = _normalised(weights, x.shape)
    n = _size(p)
    mx, my = (p * x).sum(-1, keepdims=True), (p * y).sum(-1, keepdims=True)
    u, v = x - mx, y - my
    sxx, syy, sxy = (
        (p * u * u).sum(-1, keepdims=True),
        (p * v * v).sum(-1, keepdims=True),
        (p * u * v).sum(-1, keepdims=True),
    )
    d = mx - my
    den = sxx + syy + d * d
    with np.errstate(divide="ignore", invalid="ignore"):
        k = 2.0 * sxy / den
        infl = (2.0 * (u * v - sxy) - k * ((u * u - sxx) + (v * v - syy) + 2.0 * d * (u - v))) / den
        sigma = np.sqrt(n * (p * p * infl * infl).sum(axis=-1))
    k = k[..., 0]
    bad = ~(den[..., 0] > 0)
    return np.where(bad, np.nan, k), np.where(bad, np.nan, sigma)


def kappa_sequence(x: np.ndarray, y: np.ndarray, rule: Rule, weights: np.ndarray | None = None) -> Sequence:
    """The CS of quadratic kappa between label positions ``x`` and ``y`` (one item each; ``weights``: inverse
    inclusion probabilities, where the items were drawn unequally)."""
    w = None if weights is None else np.asarray(weights, float)[None]
    est, low, high, sigma = kappa_bounds(np.asarray(x, float)[None], np.asarray(y, float)[None], rule, w)
    return Sequence(float(est[0]), float(low[0]), float(high[0]), float(sigma[0]), len(x))


def kappa_bounds(x: np.ndarray, y: np.ndarray, rule: Rule, weights: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Estimate, lower and upper bound and sigma of quadratic kappa for each row of ``x`` and ``y`` (label
    positions, one row per data set, items along the last axis); NaN where undefined."""
    if x.shape[-1] < 2:
        nan = np.full(x.shape[:-1], np.nan)
        return nan, nan, nan, nan
    n = _size(_normalised(weights, x.shape))
    k, s = kappa_and_sigma(x, y, weights)
    kc = np.clip(k, -0.999999, 0.999999)
    z, sz = np.arctanh(kc), s / (1.0 - kc * kc)  # Lin's (1989) z-transform of the concordance
    r = sz * rule.radius(n)
    return k, np.tanh(z - r), np.tanh(z + r), sz


def spearman_sequence(a: np.ndarray, b: np.ndarray, rule: Rule, weights: np.ndarray | None = None) -> Sequence:
    """The CS of Spearman's rho between ``a`` and ``b`` (Fisher z, sigma from its influence function and never
    below Bonett-Wright's, t = n - 3; with
    ``weights``, the weighted correlation of the ranks and Kish's effective n)."""
    w = None if weights is None else np.asarray(weights, float)[None]
    est, low, high, sigma = spearman_bounds(np.asarray(a, float)[None], np.asarray(b, float)[None], rule, w)
    return Sequence(float(est[0]), float(low[0]), float(high[0]), float(sigma[0]), len(a), 3)


def spearman_bounds(
    a: np.ndarray, b: np.ndarray, rule: Rule, weights: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """As ``kappa_bounds``, for Spearman's rho (ranks with ties averaged); NaN below 5 items or on a constant."""
    n = a.shape[-1]
    if n < 5:
        nan = np.full(a.shape[:-1], np.nan)
        return nan, nan, nan, nan
    p = _normalised(weights, a.shape)
    ra, rb = average_ranks(a), average_ranks(b)
    ra -= (p * ra).sum(axis=-1, keepdims=True)
    rb -= (p * rb).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = (p * ra * rb).sum(-1) / np.sqrt((p * ra * ra).sum(-1) * (p * rb * rb).sum(-1))
    rho = np.clip(rho, -1.0, 1.0)
    rc = np.clip(rho, -0.999999, 0.999999)
    z = np.arctanh(rc)
    n_eff = 1.0 / (p * p).sum(axis=-1)  # Kish: n at equal weights
    # sigma on the z scale: the influence values' (on tied scales the statistic's own), never below Bonett &
    # Wright's normal-theory value (which keeps a sequence open where every rated item agrees)
    ta, tb = _ties(a), _ties(b)
    infl = _spearman_influence(_mid_below(ta, p), _mid_below(tb, p), p, rho, (ta, tb))
    with np.errstate(divide="ignore", invalid="ignore"):
        s_if = np.sqrt(n_eff * (p * p * infl * infl).sum(-1)) / (1.0 - rc * rc)
    s = np.fmax(s_if, np.sqrt(1.0 + rho * rho / 2.0))
    r = s * rule.radius(n_eff - 3)
    return rho, np.tanh(z - r), np.tanh(z + r), s


def _z(value: float) -> float:
    return math.atanh(min(max(value, -0.999999), 0.999999))


def _room(seq: Sequence, bar: float, m: float) -> float:
    """How far the estimate is from the bound it must clear on its side of the bar, on the CS's scale."""
    e = _z(seq.estimate)
    return e - _z(bar - m) if seq.estimate >= bar else _z(bar + m) - e


def _size_for(seq: Sequence, room: float, rule: Rule) -> int:
    """The smallest size at which the CS's radius, with this sigma, is at most ``room``."""
    if room <= 0 or seq.sigma == 0:
        return seq.n if seq.sigma == 0 else seq.n + NEEDED_CAP
    lo, hi = max(seq.n, 4), seq.n + NEEDED_CAP

    def fits(size: int) -> bool:
        return seq.sigma * float(rule.radius(size - seq.offset)) <= room

    if not fits(hi):
        return hi
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def verdicts(bounds: list[tuple[np.ndarray, np.ndarray, float]], n: int, rule: Rule) -> np.ndarray:
    """The verdict of each data set from each statistic's (lower bounds, upper bounds, bar), all at size ``n``."""
    m = rule.margin
    shape = np.shape(bounds[0][0]) if bounds else ()
    defined = np.ones(shape, bool)
    trusted = np.ones(shape, bool)
    below = np.zeros(shape, bool)
    for low, high, bar in bounds:
        defined &= ~(np.isnan(low) | np.isnan(high))
        trusted &= low >= bar - m
        below |= high < bar + m
    decidable = defined & (n >= rule.min_samples) & bool(bounds)
    return np.where(decidable & trusted, TRUSTED, np.where(decidable & below, UNTRUSTED, PENDING))


def decide(stats: list[tuple[Sequence, float]], rule: Rule) -> tuple[str, int]:
    """The verdict from each statistic's CS and bar, and how many more rated samples would likely settle it
    (0 once decided, at least 1 while pending). ``stats``: (sequence, bar) pairs, every one of which a trusted
    judge must reach."""
    n = min((s.n for s, _ in stats), default=0)
    bounds = [(np.array(s.low), np.array(s.high), bar) for s, bar in stats]
    verdict = str(verdicts(bounds, n, rule)) if stats else PENDING
    return verdict, 0 if verdict != PENDING else max(1, ratings_needed(stats, rule))


MAX_LOOKS = 400  # sizes a decision is looked at, at most: every size up to it, then spread evenly in log-size


FRAME_LOOKS = 60  # the active-inference sequences pass over every judged sample at each look: fewer looks


def looks(n: int, rule: Rule, most: int = MAX_LOOKS) -> np.ndarray:
    """The sizes, in arrival order, at which a verdict is decided again: every size from the floor to ``n`` (or,
    past ``most`` of them, that many spread evenly in log-size, always with ``n``). A CS covers at every size at
    once, so any subset of sizes keeps its level; fewer looks only decide a little later."""
    first = max(rule.min_samples, 2)
    if n < first:
        return np.zeros(0, int)
    if n - first + 1 <= most:
        return np.arange(first, n + 1)
    spread = np.unique(np.round(np.geomspace(first, n, most)).astype(int))
    return np.union1d(spread, [n])


def prefix_rows(values: np.ndarray, sizes: np.ndarray, fill: float) -> np.ndarray:
    """One row per size: ``values`` with the items past that size replaced by ``fill`` (they are given no weight,
    ``prefix_weights``; ``fill`` keeps them out of the others' ranks: +inf sorts after every item)."""
    n = len(values)
    inside = np.arange(n)[None, :] < sizes[:, None]
    return np.where(inside, np.asarray(values, float)[None, :], fill)


def prefix_weights(weights: np.ndarray | None, n: int, sizes: np.ndarray) -> np.ndarray:
    """One row per size: each item's weight (1 without weights) up to that size, 0 past it."""
    w = np.ones(n) if weights is None else np.asarray(weights, float)
    return np.where(np.arange(n)[None, :] < sizes[:, None], w[None, :], 0.0)


PREFIX_CELLS = 1_000_000  # values in one block of prefix rows


def prefix_bounds(
    bounds: Callable[..., tuple[np.ndarray, ...]],
    a: np.ndarray,
    b: np.ndarray,
    sizes: np.ndarray,
    rule: Rule,
    weights: np.ndarray | None = None,
    fill: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``bounds`` (``kappa_bounds``, ``spearman_bounds``) of the first ``size`` items of ``a`` and ``b`` for each
    of ``sizes``: the lower and upper bounds, one per size, computed a block of sizes at a time (a block holds at
    most ``PREFIX_CELLS`` values)."""
    n = len(a)
    lows, highs = [], []
    step = max(1, PREFIX_CELLS // max(n, 1))
    for i in range(0, len(sizes), step):
        part = sizes[i : i + step]
        w = prefix_weights(weights, n, part)
        _, low, high, _ = bounds(prefix_rows(a, part, fill), prefix_rows(b, part, fill), rule, w)
        lows.append(low)
        highs.append(high)
    empty = np.zeros(0)
    return (np.concatenate(lows), np.concatenate(highs)) if lows else (empty, empty)


@dataclass(frozen=True)
class Held:
    """A verdict decided at every look in arrival order and held from its first crossing (``held``):
    ``verdict``, the look at which it was reached (``at``: an index into the looks, -1 while pending), the look
    from which the history counts (``since``: 0, or where the ratings contradicted the ones before), and each
    statistic's running intersection of its CS at the last look (``low``, ``high``)."""

    verdict: str
    at: int
    low: tuple[float, ...]
    high: tuple[float, ...]
    since: int = 0


def held(bounds: list[tuple[np.ndarray, np.ndarray, float]], sizes: np.ndarray, rule: Rule) -> Held:
    """The decision over a history: per statistic, its CS's lower and upper bound at each of ``sizes`` (arrival
    order) and its bar. Each CS is intersected with its past (the running maximum of the lower bounds, minimum
    of the upper: a CS covers at all sizes at once, so the intersection covers whenever it does), the verdict at
    each look is ``verdicts`` of those, and the first decided one holds from then on. Its error is the CS's: a
    judge whose true value lies past the margin is decided wrongly only at a look where some CS missed, at most
    alpha / 2 on the side it matters.

    Evidence that crosses the other way is an intersection that becomes empty: the ratings since contradict the
    ones before at the stated level (the judge's agreement changed, or a CS missed). The history then counts from
    that look: intersected anew, decided anew. A bound undefined at a look (NaN) bounds nothing there."""
    if not bounds or len(sizes) == 0:
        nan = tuple(math.nan for _ in bounds)
        return Held(PENDING, -1, nan, nan)
    lows = [np.where(np.isnan(low), -np.inf, low) for low, _, _ in bounds]
    highs = [np.where(np.isnan(high), np.inf, high) for _, high, _ in bounds]
    bars = [bar for _, _, bar in bounds]
    run_lo, run_hi = [lo[0] for lo in lows], [hi[0] for hi in highs]
    verdict, at, since = PENDING, -1, 0
    for i, n in enumerate(sizes):
        if i:
            run_lo = [max(r, lo[i]) for r, lo in zip(run_lo, lows)]
            run_hi = [min(r, hi[i]) for r, hi in zip(run_hi, highs)]
        if any(lo > hi for lo, hi in zip(run_lo, run_hi)):  # contradicted: count from here
            run_lo, run_hi = [lo[i] for lo in lows], [hi[i] for hi in highs]
            verdict, at, since = PENDING, -1, i
        if verdict == PENDING:
            now = verdicts([(np.array(lo), np.array(hi), b) for lo, hi, b in zip(run_lo, run_hi, bars)], int(n), rule)
            if str(now) != PENDING:
                verdict, at = str(now), i

    def finite(v: float) -> float:
        return float(v) if np.isfinite(v) else math.nan

    return Held(verdict, at, tuple(finite(v) for v in run_lo), tuple(finite(v) for v in run_hi), since)


def ratings_needed(stats: list[tuple[Sequence, float]], rule: Rule) -> int:
    """More rated samples that would settle the verdict if the estimates and sigmas stayed where they are: the
    size at which every statistic clears ``bar - margin`` when all are at or above their bar (trusted), else the
    soonest size at which a statistic below its bar clears ``bar + margin`` (untrusted); at least what the floor
    asks. Undefined statistics (too few or identical ratings) ask only for the floor, at least one more."""
    n = min((s.n for s, _ in stats), default=0)
    floor = max(rule.min_samples - n, 0)
    if not stats or not all(s.defined for s, _ in stats):
        return max(floor, 1)
    below = [(s, bar) for s, bar in stats if s.estimate < bar]
    if below:
        size = min(_size_for(s, _room(s, bar, rule.margin), rule) for s, bar in below)
    else:
        size = max(_size_for(s, _room(s, bar, rule.margin), rule) for s, bar in stats)
    return max(size - n, floor, 1 if size > n or floor else 0)


def ppi_kappa_bounds(
    judge: np.ndarray,
    mean: np.ndarray,
    second: np.ndarray,
    rated: np.ndarray,
    people: np.ndarray,
    pi: np.ndarray,
    rule: Rule,
) -> tuple[np.ndarray, ...]:
    """Quadratic kappa between the judge and people over a whole frame of judged items, people having rated a
    sample of it drawn with known inclusion probabilities (the active queue): the active-inference estimator
    (Zrnic & Candès 2024) of kappa as a function of moments. Per row (one data set; items along the last axis):

    * ``judge``: the judge's label position on every item of the frame (N); its moments are the frame's, exactly;
    * ``mean``, ``second``: the judge's prediction of the people's position on every item and of its square (from
      its score distribution; without one, the score and its square);
    * ``rated``: the rated items' indices into the frame (n), ``people`` their people's positions, ``pi`` their
      inclusion probabilities.

    The people's moments are difference estimators, ``lambda * mean(prediction) + sum_rated (y - lambda *
    prediction) / pi / N``, with ``lambda`` in [0, 1] chosen to minimise the variance (PPI++, Angelopoulos et al.
    2023; its small bias vanishes with n). The variance is the design's, Hajek's approximation for a fixed-size
    sample, ``sum_rated c_i (phi_i / pi_i - A)² / N²`` with ``c_i = (1 - pi_i) n / (n - 1)`` and ``A`` the
    c-weighted mean (Deville & Tille 2005), phi the kappa-gradient combination of the residuals, plus the
    frame's own sampling variance about the judge's agreement on items yet to come (the influence values'
    weighted variance / N), sigma times the design's small-sample factor (``design.small_sample_factor``; #72.4:
    without it the fixed-size 95 % intervals covered 92-94 % at 50 ratings). The CS is built on Lin's z scale as
    ``kappa_bounds`` is, with t = n. Returns estimate,
    lower bound, upper bound and sigma (on the z scale); NaN where undefined."""
    j, h, q = (np.atleast_2d(np.asarray(a, float)) for a in (judge, mean, second))
    idx = np.atleast_2d(np.asarray(rated, int))
    y, p = np.atleast_2d(np.asarray(people, float)), np.atleast_2d(np.asarray(pi, float))
    n_all, n = j.shape[-1], idx.shape[-1]
    if n < 2:
        nan = np.full(j.shape[:-1], np.nan)
        return nan, nan, nan, nan
    w = 1.0 / p
    jr, hr, qr = (np.take_along_axis(a, idx, -1) for a in (j, h, q))
    mu_j, m_jj = j.mean(-1), (j * j).mean(-1)
    full = np.stack([h.mean(-1), q.mean(-1), (j * h).mean(-1)])  # the predictions' means over the frame
    ys = np.stack([y, y * y, jr * y])  # the people's values of each moment on the rated items
    fs = np.stack([hr, qr, jr * hr])  # the same, predicted

    def moments(lam: np.ndarray) -> np.ndarray:
        return np.asarray(lam * full + (w * (ys - lam[..., None] * fs)).sum(-1) / n_all, float)

    def kappa(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        den = m_jj + m[1] - 2.0 * mu_j * m[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            return 2.0 * (m[2] - mu_j * m[0]) / den, den

    def gradient(k: np.ndarray, den: np.ndarray) -> np.ndarray:  # d kappa / d (mu_h, m_hh, m_jh)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.stack([-2.0 * mu_j * (1.0 - k) / den, -k / den, 2.0 / den])

    share = w / w.sum(-1, keepdims=True)

    def wvar(a: np.ndarray) -> np.ndarray:
        return np.asarray((share * (a - (share * a).sum(-1, keepdims=True)) ** 2).sum(-1), float)

    g = gradient(*kappa(moments(np.ones(j.shape[:-1]))))
    a_, b_ = (g[..., None] * ys).sum(0), (g[..., None] * fs).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = (share * (a_ - (share * a_).sum(-1, keepdims=True)) * (b_ - (share * b_).sum(-1, keepdims=True))).sum(-1)
        lam = np.clip(np.nan_to_num(cov / wvar(b_)), 0.0, 1.0)
    k, den = kappa(moments(lam))
    g = gradient(k, den)
    phi = (g[..., None] * (ys - lam[None, :, None] * fs)).sum(0)
    design = hajek_variance(phi, p) / n_all**2
    frame_var = _kappa_frame_variance(jr, y, mu_j, m_jj, share, k, den) / n_all
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.sqrt(n * (design + frame_var))
    return _on_z_scale(k, sigma * _small_sample(p), n, rule, ~(den > 0) | np.isnan(sigma))


def _kappa_frame_variance(
    jr: np.ndarray,
    y: np.ndarray,
    mu_j: np.ndarray,
    m_jj: np.ndarray,
    share: np.ndarray,
    k: np.ndarray,
    den: np.ndarray,
) -> np.ndarray:
    """The frame's own variance of kappa per item (``ppi_kappa_bounds``): kappa's influence values on the rated
    items (the judge's positions ``jr``, the people's ``y``), weighted to the frame by ``share``."""
    mh = (share * y).sum(-1, keepdims=True)
    u, v = jr - mu_j[..., None], y - mh
    sxy = (share * u * v).sum(-1, keepdims=True)
    sxx, syy = (m_jj - mu_j**2)[..., None], (share * v * v).sum(-1, keepdims=True)
    d = mu_j[..., None] - mh
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = (u * u - sxx) + (v * v - syy) + 2.0 * d * (u - v)
        infl = (2.0 * (u * v - sxy) - k[..., None] * spread) / den[..., None]
        return np.asarray((share * infl * infl).sum(-1), float)


# what the active-inference estimators take from their ratings before their variance: kappa's three people's
# moments and lambda (Spearman's is calibrated to the same count on the bench's processes)
SPENT = 4


def _small_sample(pi: np.ndarray) -> np.ndarray:
    """The design's small-sample factor on sigma (``design.small_sample_factor`` at the rated items' effective
    size)."""
    return small_sample_factor(effective_size(pi), SPENT)


def _on_z_scale(
    estimate: np.ndarray, sigma: np.ndarray, n: int, rule: Rule, bad: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Estimate, bounds and sigma of a correlation-like statistic (kappa, Spearman) whose per-item sigma on its
    own scale is ``sigma``: the CS built on the z scale (sigma / (1 - estimate²)) and mapped back with tanh; NaN
    where ``bad``."""
    c = np.clip(estimate, -0.999999, 0.999999)
    sz = sigma / (1.0 - c * c)
    z, r = np.arctanh(c), sz * rule.radius(n)
    return (
        np.where(bad, np.nan, estimate),
        np.where(bad, np.nan, np.tanh(z - r)),
        np.where(bad, np.nan, np.tanh(z + r)),
        np.where(bad, np.nan, sz),
    )


def ppi_spearman_bounds(
    judge: np.ndarray,
    probs: np.ndarray,
    values: np.ndarray,
    rated: np.ndarray,
    people: np.ndarray,
    pi: np.ndarray,
    rule: Rule,
) -> tuple[np.ndarray, ...]:
    """Spearman's rho between the judge and people over a whole frame of judged items, people having rated a
    sample drawn with known inclusion probabilities (the companion of ``ppi_kappa_bounds``). Over the frame, rho
    is the correlation of mid-rank CDFs: the judge's, ``R_J``, known exactly; the people's, ``R(v) = F(v-) + p_v / 2``
    for each value v people's score takes, from the shares ``p_v``. With ``c_v = mean(R_J 1[H = v])``,

        rho = (sum_v R(v) c_v - 1/4) / sqrt(var(R_J) (sum_v p_v R(v)² - 1/4)),

    and ``p_v``, ``c_v`` are difference estimators with the judge's predicted probability of each value as the
    prediction (``probs``, items by ``values``; lambda 1, so the shares sum to one):
    ``p_v = mean(P_v) + sum_rated (1[H = v] - P_v) / pi / N``, and ``c_v`` likewise times ``R_J``. The variance
    is the design's (Hajek's, of the gradient combination of the residuals) plus the frame's own (the influence
    values' weighted variance / N, ``_spearman_influence``), sigma times the design's small-sample factor as for kappa;
    the CS is built on Fisher's z with t = n. ``people``
    must be among ``values``. Returns estimate, lower bound, upper bound and sigma (z scale); NaN where
    undefined."""
    j = np.atleast_2d(np.asarray(judge, float))
    pr = np.asarray(probs, float).reshape(j.shape + (len(values),))
    idx = np.atleast_2d(np.asarray(rated, int))
    y, p = np.atleast_2d(np.asarray(people, float)), np.atleast_2d(np.asarray(pi, float))
    vals = np.asarray(values, float)
    n_all, n = j.shape[-1], idx.shape[-1]
    if n < 5:
        nan = np.full(j.shape[:-1], np.nan)
        return nan, nan, nan, nan
    w = 1.0 / p
    rj = (average_ranks(j) - 0.5) / n_all  # the judge's mid-rank CDF over the frame
    var_j = (rj * rj).mean(-1) - rj.mean(-1) ** 2
    at = np.searchsorted(vals, y)
    onehot = (np.arange(len(vals)) == at[..., None]).astype(float)  # (rows, n, values)
    pr_r = np.take_along_axis(pr, idx[..., None], -2)
    rj_r = np.take_along_axis(rj, idx, -1)
    resid = onehot - pr_r
    share = pr.mean(-2) + (w[..., None] * resid).sum(-2) / n_all  # p_v
    cross = (rj[..., None] * pr).mean(-2) + (w[..., None] * rj_r[..., None] * resid).sum(-2) / n_all  # c_v
    r_v = np.cumsum(share, -1) - share / 2.0
    top = (r_v * cross).sum(-1) - 0.25
    var_h = (share * r_v * r_v).sum(-1) - 0.25
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.clip(top / np.sqrt(var_j * var_h), -1.0, 1.0)
        # gradients of top and var_h in p_u (R(v) moves with every p_u, u <= v) and c_v
        upper = np.flip(np.cumsum(np.flip(cross, -1), -1), -1) - cross  # sum over v > u of c_v
        d_top_p = upper + cross / 2.0
        pr_r_v = share * r_v
        upper_pr = np.flip(np.cumsum(np.flip(pr_r_v, -1), -1), -1) - pr_r_v
        d_var_p = r_v * r_v + 2.0 * (upper_pr + pr_r_v / 2.0)
        g_p = rho[..., None] * (d_top_p / top[..., None] - d_var_p / (2.0 * var_h[..., None]))
        g_c = rho[..., None] * (r_v / top[..., None])
        phi = (resid * (g_p[..., None, :] + g_c[..., None, :] * rj_r[..., None])).sum(-1)
        design = hajek_variance(phi, p) / n_all**2
        frame = _spearman_frame_variance(rj_r, np.take_along_axis(r_v, at, -1), w, rho) / n_all
        sigma = np.sqrt(n * (design + frame))
    bad = ~((var_j > 0) & (var_h > 0)) | np.isnan(sigma) | np.isnan(rho)
    return _on_z_scale(rho, sigma * _small_sample(p), n, rule, bad)


def _ties(x: np.ndarray) -> np.ndarray:
    """Each item's group of equal values, numbered in ascending order of value and offset by row so that groups
    of different rows differ (items along the last axis of a 2-d ``x``)."""
    rows, n = x.shape
    order = np.argsort(x, axis=-1, kind="mergesort")
    xs = np.take_along_axis(x, order, -1)
    new = np.ones(xs.shape, bool)
    new[:, 1:] = xs[:, 1:] != xs[:, :-1]
    out = np.empty(x.shape, np.int64)
    np.put_along_axis(out, order, np.cumsum(new, axis=1) - 1 + (np.arange(rows) * n)[:, None], axis=1)
    return out


def _mid_below(ties: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Per item i: ``sum_k a_k (1[x_k < x_i] + 1[x_k = x_i] / 2)``, ``ties`` being ``_ties(x)``."""
    rows, n = a.shape
    sums = np.bincount(ties.ravel(), weights=a.ravel(), minlength=rows * n)
    below = (np.cumsum(sums.reshape(rows, n), axis=1) - sums.reshape(rows, n)).ravel()
    return np.asarray(below[ties] + sums[ties] / 2.0, float)


def _spearman_influence(
    f: np.ndarray, g: np.ndarray, share: np.ndarray, rho: np.ndarray, ties: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """Spearman's rho's influence value at each item (items along the last axis), from the mid-rank CDFs ``f`` of
    the judge and ``g`` of the people at the items, weighted by ``share`` (summing to 1): with ``theta = E[f g]``
    and ``a(x) = E[(1[x < X] + 1[x = X] / 2) g(Y)]`` and its likes, ``rho`` times the relative influences of
    ``theta - 1/4`` and of the two CDFs' variances (the denominators). On tied, discrete scales its variance is the
    statistic's own; Bonett & Wright's normal-theory ``(1 + rho²/2)`` on the z scale was 30 % short on five-level
    data (#72). ``ties``: ``_ties`` of the values ``f`` and ``g`` are CDFs of, where the caller has them."""
    tf, tg = ties if ties is not None else (_ties(f), _ties(g))

    def mean(a: np.ndarray) -> np.ndarray:
        return np.asarray((share * a).sum(-1, keepdims=True), float)

    def above(ties: np.ndarray, a: np.ndarray) -> np.ndarray:  # E[(1[x < X] + 1[x = X] / 2) a] at each item's x
        return np.asarray(mean(a) - _mid_below(ties, share * a), float)

    theta, ff, gg = mean(f * g), mean(f * f), mean(g * g)
    i_top = f * g + above(tf, g) + above(tg, f) - 3.0 * theta
    i_ff, i_gg = f * f + 2.0 * above(tf, f) - 3.0 * ff, g * g + 2.0 * above(tg, g) - 3.0 * gg
    with np.errstate(divide="ignore", invalid="ignore"):
        infl = rho[..., None] * (i_top / (theta - 0.25) - i_ff / (2.0 * (ff - 0.25)) - i_gg / (2.0 * (gg - 0.25)))
    return np.asarray(infl - mean(infl), float)


def _spearman_frame_variance(f: np.ndarray, g: np.ndarray, w: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """The variance of Spearman's rho per item of the frame: its influence values' variance at the rated items,
    weighted by ``w`` to the frame (``_spearman_influence``)."""
    share = w / w.sum(-1, keepdims=True)
    return np.asarray((share * _spearman_influence(f, g, share, rho) ** 2).sum(-1), float)


def frame_sequence(
    bounds: Callable[..., tuple[np.ndarray, ...]],
    judge: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    rated: np.ndarray,
    people: np.ndarray,
    pi: np.ndarray,
    rule: Rule,
) -> Sequence:
    """``bounds`` (``ppi_kappa_bounds`` with the prediction's mean and second moment, ``ppi_spearman_bounds`` with
    its level probabilities and the values) for one frame, as a ``Sequence`` (t = the number rated)."""
    est, low, high, sigma = bounds(judge, first, second, rated, people, pi, rule)
    return Sequence(float(est[0]), float(low[0]), float(high[0]), float(sigma[0]), len(np.atleast_1d(rated)))
