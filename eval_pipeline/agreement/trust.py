"""Trust in a judge, as a property of (rubric, judge identity), carried by every checkpoint that identity judges.

The calibration set of a judge identity is every human-rated sample of every checkpoint it judged (pooled), plus
the rubric document's worked examples (``judge_calibration``). On the pooled set, per rated dimension, the
judge's agreement with the human mean (quadratic kappa and Spearman) is decided with an anytime-valid confidence
sequence (``agreement.sequential``) against the bar of the rubric's ``judge_reliability`` gate, its indifference
``margin`` and error rate ``alpha``:

* ``trusted``: both lower bounds at or above the bar minus the margin;
* ``untrusted``: an upper bound below the bar plus the margin (and not trusted);
* ``pending``: otherwise, and always below the gate's ``min_samples`` (a floor); ``needed`` estimates how many more
  rated samples would settle it at today's estimates and variances. Neither a pass nor a failure.

The verdict keeps its error rate however often it is decided again as ratings arrive. Beside it: the bootstrap
intervals (fixed-n, descriptive), and the people's own agreement with each other where two or more rated the
same items (``versus_people``). A checkpoint with enough ratings of its own also gets a drift check: when the
upper end of its own kappa's interval lies below the pooled kappa, the judge behaves differently on this model's
outputs (``drift``). Drift does not change the verdict on the judge (a property of the judge); it fails the judge
on this checkpoint. The overall row (dimension ``ALL``) is pending if any dimension is, else untrusted if any is,
else trusted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pydantic import Field

from eval_pipeline.agreement import active
from eval_pipeline.agreement import sequential as sq
from eval_pipeline.agreement.compute import PAIR_COLUMNS
from eval_pipeline.agreement.stats import round_half_up
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.config.gates import GateParams
from eval_pipeline.core.contracts import BETWEEN_PEOPLE, JUDGE_VS_HUMAN_MEAN
from eval_pipeline.core.types import Row

TRUSTED, UNTRUSTED, PENDING = sq.TRUSTED, sq.UNTRUSTED, sq.PENDING
OVERALL = "ALL"
DEFAULT_KAPPA, DEFAULT_MIN_SAMPLES = 0.6, 30


class ReliabilityParams(GateParams):
    """The judge_reliability gate's ``params`` (its kappa bar is the gate's threshold, its minimum the gate's
    min_samples)."""

    min_spearman: float = Field(0.5, description="The judge's Spearman with the people's mean must reach it too.")
    example_tolerance: float = Field(1.0, description="How far the judge may be from a worked example's stated score.")
    alpha: float = Field(
        sq.DEFAULT_ALPHA,
        gt=0,
        lt=0.5,
        description="Error rate of the trust decision, however often it is decided again as ratings arrive.",
    )
    margin: float = Field(
        sq.DEFAULT_MARGIN,
        ge=0,
        lt=0.5,
        description="Indifference margin around each bar: a judge within it of the bar may be called either way; "
        "one past it is called wrongly at most alpha of the time.",
    )
    design_n: int = Field(
        sq.DEFAULT_DESIGN_N,
        ge=10,
        description="The number of rated samples at which the confidence sequence is tightest.",
    )


_PARAMS = ReliabilityParams()

TRUST_COLUMNS = [
    "checkpoint_id",
    "judge_identity",
    "judge_label",
    "dimension",
    "n_rated",
    "n_checkpoints",
    "kappa_quadratic",
    "kappa_ci_low",
    "kappa_ci_high",
    "spearman",
    "spearman_ci_low",
    "spearman_ci_high",
    "verdict",
    "needed",
    "own_n",
    "own_kappa_quadratic",
    "drift",
    "reason",
    "kappa_cs_low",
    "kappa_cs_high",
    "spearman_cs_low",
    "spearman_cs_high",
    "alpha",
    "margin",
    "human_kappa_quadratic",
    "human_kappa_ci_low",
    "human_kappa_ci_high",
    "versus_people",
    "decided_n",
    "decided_at",
]
DTYPES = {
    "n_rated": "int64",
    "n_checkpoints": "int64",
    "needed": "int64",
    "kappa_cs_low": "float64",
    "kappa_cs_high": "float64",
    "spearman_cs_low": "float64",
    "spearman_cs_high": "float64",
    "alpha": "float64",
    "margin": "float64",
    "human_kappa_quadratic": "float64",
    "human_kappa_ci_low": "float64",
    "human_kappa_ci_high": "float64",
    "own_n": "int64",
    "kappa_quadratic": "float64",
    "kappa_ci_low": "float64",
    "kappa_ci_high": "float64",
    "spearman": "float64",
    "spearman_ci_low": "float64",
    "spearman_ci_high": "float64",
    "own_kappa_quadratic": "float64",
    "drift": "boolean",
    "decided_n": "int64",
    "decided_at": "datetime64[us, UTC]",
}


@dataclass(frozen=True)
class JudgeBar:
    """What a judge must reach, from the rubric's judge_reliability gate (else the defaults)."""

    kappa: float = DEFAULT_KAPPA
    spearman: float = _PARAMS.min_spearman
    min_samples: int = DEFAULT_MIN_SAMPLES
    example_tolerance: float = _PARAMS.example_tolerance
    alpha: float = _PARAMS.alpha
    margin: float = _PARAMS.margin
    design_n: int = _PARAMS.design_n

    @property
    def rule(self) -> sq.Rule:
        return sq.Rule(self.alpha, self.margin, self.design_n, self.min_samples)


def judge_bar(rubric: RubricConfig) -> JudgeBar:
    """The rubric's bar for its judge: the one place its judge_reliability gate is looked up."""
    for g in rubric.gates:
        if g.kind == "judge_reliability":
            p = ReliabilityParams.model_validate(g.params)
            return JudgeBar(
                float(g.threshold),
                p.min_spearman,
                int(g.min_samples),
                p.example_tolerance,
                p.alpha,
                p.margin,
                p.design_n,
            )
    return JudgeBar()


def _judge_vs_people(agreement: pd.DataFrame, statistic: str) -> pd.DataFrame:
    """The agreement rows of the judge against the people's mean, for ``statistic``."""
    return agreement[(agreement.raters == JUDGE_VS_HUMAN_MEAN) & (agreement.statistic == statistic)]


def _stat(agreement: pd.DataFrame, dim: str, statistic: str) -> tuple[int, float, float, float]:
    rows = _judge_vs_people(agreement, statistic)
    rows = rows[rows.dimension == dim]
    if rows.empty:
        return 0, math.nan, math.nan, math.nan
    r = rows.iloc[0]
    return int(r.n_items), float(r.value), float(r.ci_low), float(r.ci_high)


NO_PEOPLE_BASELINE = "no people baseline: fewer than two people rated the same items"


def _people(agreement: pd.DataFrame, dim: str) -> tuple[float, float, float]:
    """The people's quadratic kappa with each other on ``dim`` (pairs of people on shared items; several pairs:
    their means weighted by shared items, bounds too), or NaNs where no two people rated the same items. Only rows
    computed as people with people (``between``, set where the row is made): never the judge's rows, whatever
    their raters are called, nor model raters' (#72: the judge's written scores, ``judge_chosen~human_mean``, were
    averaged into the baseline, and with one rater they were the whole of it). Rows without ``between`` (stored
    before it) give no baseline."""
    if "between" not in agreement.columns:
        return math.nan, math.nan, math.nan
    rows = agreement[
        (agreement.dimension == dim)
        & (agreement.statistic == "cohen_kappa_quadratic")
        & (agreement["between"] == BETWEEN_PEOPLE)
        & agreement.value.notna()
    ]
    if rows.empty:
        return math.nan, math.nan, math.nan
    w = rows.n_items.to_numpy(float)

    def mean(col: str) -> float:
        v = rows[col].to_numpy(float)
        ok = ~np.isnan(v)
        return float(np.average(v[ok], weights=w[ok])) if ok.any() else math.nan

    return mean("value"), mean("ci_low"), mean("ci_high")


def versus_people(judge: tuple[float, float, float], people: tuple[float, float, float]) -> str | None:
    """The judge's kappa (estimate, low, high) set beside the people's with each other: ``as consistent as
    people`` when the intervals overlap, else ``below people`` / ``above people``; None without a baseline."""
    if any(math.isnan(v) for v in (*people[1:], *judge[1:])):
        return None
    if judge[2] < people[1]:
        return "below people"
    if judge[1] > people[2]:
        return "above people"
    return "as consistent as people"


@dataclass(frozen=True)
class _Decision:
    """One dimension's decision over its history (``_decide``): the CSs on every rated item (the estimates, and
    what ``needed`` projects from), the verdict held from its first crossing, and when that was."""

    kappa: sq.Sequence
    spearman: sq.Sequence
    held: sq.Held
    since_n: int  # rated samples at the first crossing (0: pending)
    since: str  # when the item that decided it arrived (ISO 8601, UTC; "" when unknown or pending)
    counted_from: int  # 0, or the rated sample from which the history counts (the ratings contradicted earlier ones)
    timed: bool  # every rated item has its arrival: the decision is held along it


def _decide(
    rubric: RubricConfig,
    dim: str,
    pair: pd.DataFrame,
    bars: tuple[float, float],
    rule: sq.Rule,
    weights: pd.Series | None,
    frame: pd.DataFrame | None = None,
) -> _Decision:
    """Kappa's CS on the scale's label positions of both scores rounded half up (as the agreement table's
    kappa), and Spearman's on the scores as they are, decided again at every look in the order the items arrived
    (``sequential.held``: the first crossing holds; ties and items of unknown arrival in item order, after the
    known ones); ``weights``: inverse inclusion probabilities by (checkpoint_id, sample_id), where people rated by
    the active queue (None: every item alike). With ``frame`` (every judged sample of the pooled checkpoints:
    checkpoint_id, sample_id, score, the judge's prediction of people's score, ``mean`` and ``second``, on the
    people's scale, its ``distribution`` and what divides it onto that scale) and weights, both CSs are the
    active-inference ones over the whole frame (``sequential.ppi_kappa_bounds``, ``ppi_spearman_bounds``)."""
    scale = rubric.rating_scales[dim]
    labels = np.asarray([float(x) for x in scale.labels])
    timed = "arrived" in pair.columns and len(pair) > 0 and bool(pair.arrived.notna().all())
    if timed:
        pair = pair.iloc[np.argsort(pair.arrived.to_numpy(), kind="stable")]
    w = None
    if weights is not None and len(pair):  # items the design leaves out (rated past the queue's order) drop out
        keys = pd.MultiIndex.from_arrays([pair.checkpoint_id.astype(str), pair.sample_id.astype(str)])
        found = weights.reindex(keys).to_numpy(float)
        pair, w = pair[~np.isnan(found)], found[~np.isnan(found)]
    a, b = pair.judge.to_numpy(float), pair.human.to_numpy(float)
    # without every item's arrival there is no history to hold a decision along: decided on the ratings as they
    # stand (one look), as before #72 (an order made up at each look, e.g. by sample id, gave 17 % false trust)
    sizes = sq.looks(len(a), rule) if timed else _last_look(len(a), rule)

    def positions(v: np.ndarray) -> np.ndarray:
        return np.asarray(np.searchsorted(labels, np.clip(round_half_up(v), scale.min, scale.max)), float)

    if w is not None and frame is not None and _over_frame(rubric, dim, frame):
        at = pd.MultiIndex.from_frame(frame[["checkpoint_id", "sample_id"]].astype(str)).get_indexer(
            pd.MultiIndex.from_arrays([pair.checkpoint_id.astype(str), pair.sample_id.astype(str)])
        )
        ok = at >= 0
        pair = pair[ok]
        low, step = labels[0], labels[1] - labels[0]
        score, h, q = (frame[c].to_numpy(float) for c in ("score", "mean", "second"))
        h_pos, q_pos = (h - low) / step, (q - 2.0 * low * h + low * low) / (step * step)
        idx, pi, people = at[ok], 1.0 / w[ok], b[ok]
        values = np.union1d(labels, people)  # a mean of several people may lie between two labels
        probs = active.level_probabilities(frame.distribution, score, values, frame["divide"].to_numpy(float))
        sizes = sq.looks(len(idx), rule, sq.FRAME_LOOKS) if timed else _last_look(len(idx), rule)  # a pass each

        def kappa_at(m: int) -> sq.Sequence:
            args = (positions(score), h_pos, q_pos, idx[:m], positions(people[:m]), pi[:m], rule)
            return sq.frame_sequence(sq.ppi_kappa_bounds, *args)

        def spearman_at(m: int) -> sq.Sequence:
            return sq.frame_sequence(sq.ppi_spearman_bounds, score, probs, values, idx[:m], people[:m], pi[:m], rule)

        ks, rs = [kappa_at(int(m)) for m in sizes], [spearman_at(int(m)) for m in sizes]
        # the last look is every rated item (looks always end at n): not computed again
        kappa, rho = (ks[-1], rs[-1]) if len(ks) else (kappa_at(len(idx)), spearman_at(len(idx)))
        history = [
            (np.array([x.low for x in ks]), np.array([x.high for x in ks]), bars[0]),
            (np.array([x.low for x in rs]), np.array([x.high for x in rs]), bars[1]),
        ]
    else:
        kappa, rho = sq.kappa_sequence(positions(a), positions(b), rule, w), sq.spearman_sequence(a, b, rule, w)
        k_lo, k_hi = sq.prefix_bounds(sq.kappa_bounds, positions(a), positions(b), sizes, rule, w)
        r_lo, r_hi = sq.prefix_bounds(sq.spearman_bounds, a, b, sizes, rule, w, fill=math.inf)
        history = [(k_lo, k_hi, bars[0]), (r_lo, r_hi, bars[1])]
    held = sq.held(history, sizes, rule)
    since_n = int(sizes[held.at]) if held.at >= 0 else 0
    since = ""
    if since_n and "arrived" in pair.columns:
        moment = pd.Timestamp(pair.arrived.iloc[since_n - 1])
        since = "" if moment is pd.NaT else moment.isoformat()
    return _Decision(kappa, rho, held, since_n, since, int(sizes[held.since]) if held.since else 0, timed)


def _last_look(n: int, rule: sq.Rule) -> np.ndarray:
    """The one look of a decision on the ratings as they stand: at ``n``, from the floor on."""
    return np.array([n] if n >= max(rule.min_samples, 2) else [], int)


def _over_frame(rubric: RubricConfig, dim: str, frame: pd.DataFrame | None) -> bool:
    """Whether the dimension's decision is taken over the frame of every judged sample (the active design): a
    frame is there and the scale's labels are evenly spaced (kappa's positions are then linear in the score)."""
    labels = np.asarray([float(x) for x in rubric.rating_scales[dim].labels])
    steps = np.diff(labels)
    return frame is not None and len(frame) > 0 and len(steps) > 0 and bool(np.allclose(steps, steps[0]))


def _ordinal(n: int) -> str:
    tail = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{tail}"


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.2f}"


def trust_rows(
    rubric: RubricConfig,
    checkpoint_id: str,
    identity: str,
    label: str,
    pooled: pd.DataFrame,
    own: pd.DataFrame,
    n_checkpoints: int,
    pairs: dict[str, pd.DataFrame],
    weights: pd.Series | None = None,
    frames: dict[str, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """The verdict of ``identity`` on ``rubric`` from its pooled agreement rows (``pooled``, from
    compute_agreement over every rated sample it judged), the pairs they were computed on (``pairs``: per
    dimension, judge score and human mean per rated item, from compute.judge_pairs), this checkpoint's own
    agreement rows (``own``) and, where some ratings were drawn by the active queue, every rated item's inverse
    inclusion probability (``weights``, by checkpoint_id and sample_id): the sequences are then weighted, so the
    decision is on the agreement over all samples, not over the ones the queue favoured; with ``frames`` (per
    dimension, every judged sample of the pooled checkpoints and the judge's prediction of people's score), kappa's
    is the active-inference estimator over all of them (``_sequences``). The same as ``checkpoint_trust`` of
    ``pooled_trust``: the pooled part is the identity's, computed once for all its checkpoints."""
    return checkpoint_trust(
        rubric, pooled_trust(rubric, identity, label, pooled, n_checkpoints, pairs, weights, frames), checkpoint_id, own
    )


@dataclass
class PooledTrust:
    """The part of a judge identity's trust rows that every checkpoint it judged shares (``pooled_trust``)."""

    identity: str
    label: str
    n_checkpoints: int
    dimensions: list[Row]  # per rated dimension: the pooled figures, the verdict and the reason so far

    def to_json(self) -> str:
        """Stored with what it was computed from (defs/assets/agreement.py): every value as it is (floats by
        their shortest exact repr, NaN kept), so ``from_json`` gives back an equal object."""
        return json.dumps(
            {
                "identity": self.identity,
                "label": self.label,
                "n_checkpoints": self.n_checkpoints,
                "dimensions": self.dimensions,
            },
            default=_plain,
        )

    @classmethod
    def from_json(cls, text: str) -> PooledTrust:
        raw = json.loads(text)
        return cls(str(raw["identity"]), str(raw["label"]), int(raw["n_checkpoints"]), list(raw["dimensions"]))


def _plain(value: object) -> object:
    """A NumPy scalar as the Python value it holds (JSON knows no other)."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not stored in a pooled trust")


def _dimension_trust(
    rubric: RubricConfig,
    dim: str,
    pooled: pd.DataFrame,
    n_checkpoints: int,
    pairs: dict[str, pd.DataFrame],
    weights: pd.Series | None,
    frames: dict[str, pd.DataFrame] | None,
) -> Row:
    """One dimension's row of ``pooled_trust``: its decision, what it needs, and the reason a person reads."""
    bar = judge_bar(rubric)
    rule = bar.rule
    min_kappa, min_rho, min_n = bar.kappa, bar.spearman, bar.min_samples
    n, k, k_lo, k_hi = _stat(pooled, dim, "cohen_kappa_quadratic")
    _, rho, r_lo, r_hi = _stat(pooled, dim, "spearman")
    frame = (frames or {}).get(dim)
    pair = pairs.get(dim, pd.DataFrame(columns=PAIR_COLUMNS))
    d = _decide(rubric, dim, pair, (min_kappa, min_rho), rule, weights, frame)
    kcs, rcs, verdict = d.kappa, d.spearman, d.held.verdict
    (k_low, r_low), (k_high, r_high) = d.held.low, d.held.high
    stats = [(kcs, min_kappa), (rcs, min_rho)]
    needed = 0 if verdict != PENDING else max(1, sq.ratings_needed(stats, rule))
    people = _people(pooled, dim)
    beside = versus_people((k, k_low, k_high), people)
    bars = f"kappa_q >= {min_kappa:g} and spearman >= {min_rho:g}, each within {rule.margin:g}"
    evidence = (
        f"kappa_q {_fmt(kcs.estimate)} [{_fmt(k_low)}, {_fmt(k_high)}], spearman {_fmt(rcs.estimate)} "
        f"[{_fmt(r_low)}, {_fmt(r_high)}] on {n} rated samples from {n_checkpoints} checkpoint(s) "
        f"({1 - rule.alpha:.0%} anytime-valid; needs {bars})"
    )
    if weights is not None and frame is not None and _over_frame(rubric, dim, frame):
        evidence += (
            f"; over all {len(frame)} judged samples, the ratings weighted by the active queue's chances and "
            "the judge's own distribution as its prediction"
        )
    if verdict == PENDING:
        why = f"{min_n} needed at least" if n < min_n else "the intervals straddle the bar"
        reason = f"{evidence}: {why}; about {needed} more rated samples would settle it"
    elif d.timed:
        when = f" on {d.since[:16].replace('T', ' ')} UTC" if d.since else ""
        reason = f"{evidence}; {verdict} since the {_ordinal(d.since_n)} rated sample{when}"
    else:
        reason = f"{evidence}; not held (ratings without rated_at)"
    if d.counted_from:
        reason += (
            f"; decided afresh from the {_ordinal(d.counted_from)} rated sample on: the ratings from there "
            "contradict the earlier ones (the judge's agreement changed)"
        )
    if beside is not None:
        reason += f"; {beside} (people with each other: kappa_q {people[0]:.2f} [{people[1]:.2f}, {people[2]:.2f}])"
    elif n and math.isnan(people[0]):
        reason += f"; {NO_PEOPLE_BASELINE}"
    return dict(
        dimension=dim,
        n_rated=n,
        kappa_quadratic=k,
        kappa_ci_low=k_lo,
        kappa_ci_high=k_hi,
        spearman=rho,
        spearman_ci_low=r_lo,
        spearman_ci_high=r_hi,
        verdict=verdict,
        needed=needed,
        reason=reason,
        kappa_cs_low=k_low,
        kappa_cs_high=k_high,
        spearman_cs_low=r_low,
        spearman_cs_high=r_high,
        decided_n=d.since_n,
        decided_at=d.since or None,
        human_kappa_quadratic=people[0],
        human_kappa_ci_low=people[1],
        human_kappa_ci_high=people[2],
        versus_people=beside,
    )


def pooled_trust(
    rubric: RubricConfig,
    identity: str,
    label: str,
    pooled: pd.DataFrame,
    n_checkpoints: int,
    pairs: dict[str, pd.DataFrame],
    weights: pd.Series | None = None,
    frames: dict[str, pd.DataFrame] | None = None,
) -> PooledTrust:
    """The identity's decision per dimension from its pooled calibration set (see ``trust_rows``): the confidence
    sequences, the verdict, ``needed`` and the people's baseline; computed once per identity."""
    dims = [
        _dimension_trust(rubric, dim, pooled, n_checkpoints, pairs, weights, frames) for dim in rubric.rating_scales
    ]
    return PooledTrust(identity, label, n_checkpoints, dims)


def checkpoint_trust(rubric: RubricConfig, pooled: PooledTrust, checkpoint_id: str, own: pd.DataFrame) -> pd.DataFrame:
    """One checkpoint's trust rows: the identity's pooled decision (``pooled_trust``) and this checkpoint's own
    agreement (``own``), for the drift check."""
    return checkpoints_trust(rubric, pooled, {checkpoint_id: own})


def checkpoints_trust(rubric: RubricConfig, pooled: PooledTrust, owns: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """``checkpoint_trust`` of several checkpoints the same identity judged (checkpoint -> its own agreement), as
    one frame: the rows of each, in the order given (one frame built, not one a checkpoint)."""
    kappas = _own_kappas(owns)
    rows = [r for c in owns for r in _checkpoint_rows(rubric, pooled, c, kappas)]
    return pd.DataFrame(rows, columns=TRUST_COLUMNS).astype(DTYPES)


Stat = tuple[int, float, float, float]  # n, value, interval low, interval high


def _own_kappas(owns: Mapping[str, pd.DataFrame]) -> dict[tuple[str, str], Stat]:
    """(checkpoint, dimension) -> the judge's quadratic kappa against the people's mean on that checkpoint
    (``_stat``), read from all the checkpoints' agreement rows at once."""
    kept = {c: f for c, f in owns.items() if len(f)}
    if not kept:
        return {}
    whole = pd.concat(list(kept.values()), keys=list(kept), names=["_of", None])
    rows = _judge_vs_people(whole, "cohen_kappa_quadratic")
    out: dict[tuple[str, str], Stat] = {}
    cols = (rows.n_items, rows.value, rows.ci_low, rows.ci_high)
    for c, dim, n, value, lo, hi in zip(rows.index.get_level_values(0), rows.dimension, *cols):
        out.setdefault((str(c), str(dim)), (int(n), float(value), float(lo), float(hi)))  # the first, as _stat
    return out


def _checkpoint_rows(
    rubric: RubricConfig, pooled: PooledTrust, checkpoint_id: str, kappas: Mapping[tuple[str, str], Stat]
) -> list[Row]:
    bar = judge_bar(rubric)
    rule, min_n = bar.rule, bar.min_samples
    rows: list[Row] = []
    nothing: Stat = (0, math.nan, math.nan, math.nan)
    for d in pooled.dimensions:
        dim, verdict, k, reason = d["dimension"], d["verdict"], d["kappa_quadratic"], d["reason"]
        own_n, own_k, _, own_hi = kappas.get((checkpoint_id, dim), nothing)
        drift: bool | None = None
        if verdict != PENDING and own_n >= min_n and not math.isnan(own_hi):
            drift = bool(own_hi < k)
            if drift:
                reason += f"; drift: on this checkpoint kappa_q {own_k:.2f} (its interval below the pooled {k:.2f})"
        rows.append(
            dict(
                checkpoint_id=checkpoint_id,
                judge_identity=pooled.identity,
                judge_label=pooled.label,
                dimension=dim,
                n_rated=d["n_rated"],
                n_checkpoints=pooled.n_checkpoints,
                kappa_quadratic=k,
                kappa_ci_low=d["kappa_ci_low"],
                kappa_ci_high=d["kappa_ci_high"],
                spearman=d["spearman"],
                spearman_ci_low=d["spearman_ci_low"],
                spearman_ci_high=d["spearman_ci_high"],
                verdict=verdict,
                needed=d["needed"],
                own_n=own_n,
                own_kappa_quadratic=own_k,
                drift=drift,
                reason=reason,
                kappa_cs_low=d["kappa_cs_low"],
                kappa_cs_high=d["kappa_cs_high"],
                spearman_cs_low=d["spearman_cs_low"],
                spearman_cs_high=d["spearman_cs_high"],
                alpha=rule.alpha,
                margin=rule.margin,
                human_kappa_quadratic=d["human_kappa_quadratic"],
                human_kappa_ci_low=d["human_kappa_ci_low"],
                human_kappa_ci_high=d["human_kappa_ci_high"],
                versus_people=d["versus_people"],
                decided_n=d.get("decided_n", 0),
                decided_at=d.get("decided_at"),
            )
        )
    rows.append(_overall(rows, checkpoint_id, pooled.identity, pooled.label, pooled.n_checkpoints, rule))
    return rows


def _overall(rows: list[Row], checkpoint_id: str, identity: str, label: str, n_checkpoints: int, rule: sq.Rule) -> Row:
    """The ``ALL`` row: pending if any dimension is, else untrusted if any is, else trusted; ``needed`` the most
    any pending dimension needs."""
    verdicts = [r["verdict"] for r in rows]
    overall = PENDING if PENDING in verdicts or not rows else UNTRUSTED if UNTRUSTED in verdicts else TRUSTED
    by = {v: [r["dimension"] for r in rows if r["verdict"] == v] for v in (TRUSTED, UNTRUSTED, PENDING)}
    summary = "; ".join(f"{v} on {', '.join(d)}" for v, d in by.items() if d) or "no rated dimensions"
    drifted = [r["dimension"] for r in rows if r["drift"]]
    if drifted:
        summary += (
            f"; drift on {', '.join(drifted)}: this checkpoint's own kappa_q interval is below the pooled kappa_q"
        )
    least = min((r["n_rated"] for r in rows), default=0)
    needed = max((r["needed"] for r in rows if r["verdict"] == PENDING), default=0 if rows else rule.min_samples)
    if overall == PENDING:
        summary = (
            f"pending: {least} human-rated samples judged by it across {n_checkpoints} checkpoint(s): "
            f"about {needed} more rated samples would settle it ({summary})"
        )
    below = [r["dimension"] for r in rows if r["versus_people"] == "below people"]
    if below:
        summary += f"; below people's agreement with each other on {', '.join(below)}"

    def least_of(col: str) -> float:
        return min((r[col] for r in rows if r[col] == r[col]), default=math.nan)

    return dict(
        checkpoint_id=checkpoint_id,
        judge_identity=identity,
        judge_label=label,
        dimension=OVERALL,
        n_rated=least,
        n_checkpoints=n_checkpoints,
        kappa_quadratic=least_of("kappa_quadratic"),
        kappa_ci_low=math.nan,
        kappa_ci_high=math.nan,
        spearman=least_of("spearman"),
        spearman_ci_low=math.nan,
        spearman_ci_high=math.nan,
        verdict=overall,
        needed=needed,
        own_n=min((r["own_n"] for r in rows), default=0),
        own_kappa_quadratic=math.nan,
        drift=any(r["drift"] for r in rows) if any(r["drift"] is not None for r in rows) else None,
        reason=f"{label}: {summary}",
        kappa_cs_low=math.nan,
        kappa_cs_high=math.nan,
        spearman_cs_low=math.nan,
        spearman_cs_high=math.nan,
        alpha=rule.alpha,
        margin=rule.margin,
        human_kappa_quadratic=math.nan,
        human_kappa_ci_low=math.nan,
        human_kappa_ci_high=math.nan,
        versus_people=None,
        decided_n=max((r["decided_n"] for r in rows), default=0) if overall != PENDING else 0,
        decided_at=max((r["decided_at"] for r in rows if r["decided_at"]), default=None)
        if overall != PENDING
        else None,
    )
