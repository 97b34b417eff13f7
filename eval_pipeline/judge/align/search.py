"""The search that aligns a judge to people's ratings: its contract is the package's docstring (judge.align)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from eval_pipeline.agreement import stats as st
from eval_pipeline.agreement.compute import judge_on_human_scale, rater_sets
from eval_pipeline.core.config import Example, RubricConfig
from eval_pipeline.core.config.alignment import AlignSpec
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.resampling import seed_of
from eval_pipeline.core.types import Record
from eval_pipeline.ingest.samples import load_samples, to_records
from eval_pipeline.judge.align.space import Axis, Changes, Shots, load_axes
from eval_pipeline.judge.backends import backend_for, identity_of
from eval_pipeline.judge.cached import JudgeRunStats
from eval_pipeline.judge.runner import judge_samples
from eval_pipeline.storage.warehouse import Warehouse

TUNE, HELD_OUT, SHOWN = "tune", "held_out", "shown"  # judge_alignment_items.role (shown: a few-shot example)
N_BOOT = 2000
LEVEL = 0.95


@dataclass
class Item:
    checkpoint_id: str
    sample_id: str
    human: dict[str, float]  # dimension -> the people's mean
    notes: str
    record: Record

    @property
    def key(self) -> str:
        return f"{self.checkpoint_id}/{self.sample_id}"


@dataclass
class Tried:
    """One candidate and its cross-validated agreement."""

    index: int
    values: dict[str, Any]
    label: str
    kappa: float
    kappa_low: float
    kappa_high: float
    spearman: float
    per_dimension: dict[str, float]
    calls: int
    cost: float
    changes: Changes = field(default_factory=dict)


@dataclass
class Alignment:
    id: str
    rubric: str
    dimensions: list[str]
    from_identity: str
    from_label: str
    from_prompt_version: str
    tried: list[Tried]
    chosen: int
    items: list[tuple[Item, str, int | None]]  # (item, role, fold)
    heldout_kappa: float = math.nan
    heldout_old_kappa: float = math.nan
    heldout_spearman: float = math.nan
    heldout_old_spearman: float = math.nan
    gain: float = math.nan
    gain_low: float = math.nan
    gain_high: float = math.nan
    recommended: bool = False
    verdict: str = ""
    calls: int = 0
    cost: float = 0.0
    stopped: str = ""
    shown: list[str] = field(default_factory=list)
    overlay: Changes = field(default_factory=dict)

    @property
    def best(self) -> Tried:
        return self.tried[self.chosen]


class AlignError(ValueError):
    """An alignment that cannot start (too few rated samples, an unknown dimension): said in one line."""


# --- the items and their split -------------------------------------------------------------------------------------


def rated_items(wh: Warehouse, rubric: RubricConfig, dimensions: list[str]) -> list[Item]:
    """Every sample people rated on all ``dimensions`` (their mean per dimension, their notes joined), with its
    validated record as the judge reads it; in (checkpoint, sample) order. The raters are those the agreement
    table counts as people (``rater_sets``)."""
    if not wh.table_exists(rubric.name, Table.HUMAN_RATINGS):
        return []
    ratings = wh.read(rubric.name, Table.HUMAN_RATINGS)
    human = rater_sets(rubric, ratings)["human"]  # who counts as people, as the agreement table says
    human = human[human.dimension.isin(dimensions) & human.score.notna()]
    means = human.groupby(["checkpoint_id", "sample_id", "dimension"]).score.mean()
    notes: dict[tuple[str, str], str] = {}
    if "notes" in human.columns:
        for (c, s), g in human.groupby(["checkpoint_id", "sample_id"]):
            said = sorted({str(n).strip() for n in g.notes if isinstance(n, str) and n.strip()})
            notes[(str(c), str(s))] = " / ".join(said)[:500]
    records: dict[tuple[str, str], Record] = {}
    for ckpt in sorted({str(c) for c in human.checkpoint_id}):
        for one in to_records(rubric, load_samples(wh, rubric, ckpt)):
            records[(ckpt, str(one["sample_id"]))] = one
    out = []
    for (c, s), g in means.groupby(level=[0, 1]):
        got = {str(d): float(v) for (_, _, d), v in g.items()}
        rec = records.get((str(c), str(s)))
        if rec is None or any(d not in got for d in dimensions):
            continue
        out.append(Item(str(c), str(s), got, notes.get((str(c), str(s)), ""), rec))
    return sorted(out, key=lambda i: (i.checkpoint_id, i.sample_id))


def _stratified_order(items: list[Item], dim: str, seed: int, salt: str) -> list[Item]:
    """Items sorted by their rounded human score, seeded-shuffled within each score: dealing them out in turn
    stratifies by score."""
    return sorted(items, key=lambda i: (round(i.human[dim]), seed_of(seed, salt, i.key)))


def split(items: list[Item], spec: AlignSpec, dim: str, never_held_out: set[str]) -> tuple[list[Item], list[Item]]:
    """(tuning, held out): every ``1 / holdout_share``-th item of the stratified order held out, so each score
    level gives its share; items in ``never_held_out`` are always tuning items."""
    eligible = [i for i in items if i.key not in never_held_out]
    ordered = _stratified_order(eligible, dim, spec.seed, "holdout")
    n_hold = round(len(ordered) * spec.holdout_share)
    step = len(ordered) / n_hold if n_hold else math.inf
    held_at = {int(k * step + step / 2) for k in range(n_hold)}
    held = {ordered[k].key for k in held_at if k < len(ordered)}
    return [i for i in items if i.key not in held], [i for i in items if i.key in held]


def assign_folds(items: list[Item], spec: AlignSpec, dim: str) -> dict[str, int]:
    """Each tuning item's fold: dealt out in the stratified order."""
    ordered = _stratified_order(items, dim, spec.seed, "folds")
    return {item.key: k % spec.folds for k, item in enumerate(ordered)}


def shots_from(items: list[Item], rubric: RubricConfig, dimensions: list[str], seed: int) -> Shots:
    """k few-shot examples from ``items``: spread over the people's scores (evenly spaced in the stratified order),
    each with the people's scores (rounded half up) on every rated dimension and their notes."""
    ordered = _stratified_order(items, dimensions[0], seed, "shots")
    resp, sid = rubric.inputs.response_field, rubric.inputs.id_field

    def pick(k: int) -> list[dict[str, Any]]:
        if k <= 0 or not ordered:
            return []
        k = min(k, len(ordered))
        at = sorted({int((j + 0.5) * len(ordered) / k) for j in range(k)})
        out = []
        for item in (ordered[a] for a in at):
            fields = {
                f.name: item.record.get(f.name)
                for f in rubric.inputs.fields
                if f.name not in (resp, sid) and item.record.get(f.name) is not None
            }
            scores = {d: int(st.round_half_up(np.asarray([v]))[0]) for d, v in item.human.items()}
            shot = Example(
                id=item.key, scores=scores, fields=fields, response=str(item.record.get(resp) or ""), note=item.notes
            )
            out.append(shot.model_dump(mode="json"))
        return out

    return pick


# --- judging and agreement ------------------------------------------------------------------------------------------


def variant(rubric: RubricConfig, changes: Changes) -> RubricConfig:
    """The rubric as a candidate changes it (a new object: its versions are its own)."""
    from eval_pipeline.core.config.alignment import overlay

    raw = rubric.model_dump(mode="json", exclude={"aligned"} if "aligned" in changes else set())
    return RubricConfig.model_validate(overlay(raw, changes))


@dataclass
class Spend:
    calls: int = 0
    cost: float = 0.0

    def add(self, stats: JudgeRunStats) -> None:
        self.calls += stats.calls
        self.cost += float(stats.cost or 0.0)


def judge(
    rubric: RubricConfig, items: list[Item], wh: Warehouse, config: JudgeConfig, spend: Spend
) -> dict[str, dict[str, float]]:
    """Each item's panel score per dimension on the people's scale (NaN where the judge gave none)."""
    out: dict[str, dict[str, float]] = {}
    by_ckpt: dict[str, list[Item]] = {}
    for item in items:
        by_ckpt.setdefault(item.checkpoint_id, []).append(item)
    for ckpt, group in sorted(by_ckpt.items()):
        df, stats = judge_samples(rubric, ckpt, [i.record for i in group], wh, config)
        spend.add(stats)
        scored = judge_on_human_scale(rubric, df)
        got = {(str(r.sample_id), str(r.dimension)): r.score for r in scored.itertuples()}
        for item in group:
            out[item.key] = {d: float(got.get((item.sample_id, d), math.nan)) for d in item.human}
    return out


def _labels(rubric: RubricConfig, dim: str) -> np.ndarray:
    return np.asarray([float(x) for x in rubric.rating_scales[dim].labels])


def _on_scale(rubric: RubricConfig, dim: str, v: np.ndarray) -> np.ndarray:
    sc = rubric.rating_scales[dim]
    return np.asarray(np.clip(st.round_half_up(v), sc.min, sc.max), float)


def _pairs(
    rubric: RubricConfig, dim: str, items: list[Item], scores: dict[str, dict[str, float]]
) -> tuple[np.ndarray, np.ndarray]:
    """(judge, human) on the scale. An item the judge left without a score counts as the farthest score from the
    people's (a missing score is no agreement: a candidate cannot gain by failing on hard items)."""
    sc = rubric.rating_scales[dim]
    h = _on_scale(rubric, dim, np.asarray([i.human[dim] for i in items]))
    j = np.asarray([scores[i.key][dim] for i in items], float)
    far = np.where(h - sc.min >= sc.max - h, sc.min, sc.max).astype(float)
    j = np.where(np.isnan(j), far, j)
    return _on_scale(rubric, dim, j), h


def _resamples(n: int, seed: int) -> np.ndarray:
    """N_BOOT seeded resamples of n items (one index row each), shared by every statistic of one comparison."""
    return np.random.default_rng(seed).integers(0, n, size=(N_BOOT, n))


def _kappa(rubric: RubricConfig, dim: str, j: np.ndarray, h: np.ndarray, idx: np.ndarray) -> tuple[float, np.ndarray]:
    """Quadratic kappa of judge ``j`` and people ``h`` on ``dim``'s scale, and on each resample of ``idx``."""
    labels = _labels(rubric, dim)
    return st.cohen_kappa(j, h, labels, "quadratic"), st.cohen_kappa_resamples(j, h, labels, "quadratic", idx)


def agreement(
    rubric: RubricConfig, dims: list[str], items: list[Item], scores: dict[str, dict[str, float]], seed: int
) -> tuple[float, float, float, float, dict[str, float]]:
    """(kappa_q averaged over ``dims``, its bootstrap interval, Spearman averaged, kappa_q per dimension)."""
    idx = _resamples(len(items), seed)
    per, boots, rhos = {}, [], []
    for d in dims:
        j, h = _pairs(rubric, d, items, scores)
        per[d], resampled = _kappa(rubric, d, j, h, idx)
        boots.append(resampled)
        rhos.append(st.spearman(j, h))
    mean_boot = np.mean(np.vstack(boots), axis=0)
    lo, hi = np.nanpercentile(mean_boot, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
    rho = float(np.mean([r for r in rhos if not math.isnan(r)])) if any(not math.isnan(r) for r in rhos) else math.nan
    return float(np.mean(list(per.values()))), float(lo), float(hi), rho, per


def paired_gain(
    rubric: RubricConfig,
    dims: list[str],
    items: list[Item],
    new: dict[str, dict[str, float]],
    old: dict[str, dict[str, float]],
    seed: int,
) -> tuple[float, float, float]:
    """kappa_q(new) - kappa_q(old) on the same items, averaged over ``dims``, with a paired percentile bootstrap
    interval (both kappas of a resample computed on the same resampled items)."""
    idx = _resamples(len(items), seed)
    diffs, point = [], []
    for d in dims:
        jn, h = _pairs(rubric, d, items, new)
        jo, _ = _pairs(rubric, d, items, old)
        (kn, bn), (ko, bo) = _kappa(rubric, d, jn, h, idx), _kappa(rubric, d, jo, h, idx)
        point.append(kn - ko)
        diffs.append(bn - bo)
    stack = np.vstack(diffs)
    defined = ~np.isnan(stack)  # a resample whose kappa is undefined on every dimension counts as none
    total = np.where(defined, stack, 0.0).sum(axis=0)
    mean_diff = np.where(defined.any(axis=0), total / np.maximum(defined.sum(axis=0), 1), np.nan)
    lo, hi = np.nanpercentile(mean_diff, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
    return float(np.mean(point)), float(lo), float(hi)


# --- the search ----------------------------------------------------------------------------------------------------


def alignment_id(rubric: RubricConfig, dims: list[str], spec: AlignSpec, items: list[Item], identity: str) -> str:
    """The same rubric, judge, settings and ratings give the same id (a repeat is the same alignment)."""
    ratings = sorted((i.key, sorted(i.human.items())) for i in items)
    blob = json.dumps([rubric.judge_version, identity, dims, spec.model_dump(mode="json"), ratings], default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def _describe(axes: list[Axis], values: dict[str, Any]) -> str:
    changed = [a.describe(values[a.name]) for a in axes if values[a.name] != a.values[0]]
    return ", ".join(changed) or "the current judge"


def align(
    rubric: RubricConfig,
    config: JudgeConfig,
    wh: Warehouse,
    items: list[Item],
    dimensions: list[str],
    spec: AlignSpec | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> Alignment:
    """Search the judge's configurations on the tuning share and compare the best with the current judge on the
    held-out share (the module's contract). ``items``: every rated sample (``rated_items``)."""
    spec = spec or rubric.align
    unknown = [d for d in dimensions if d not in rubric.rating_scales]
    if unknown:
        raise AlignError(f"unknown dimension(s) {unknown} (rated: {', '.join(rubric.rating_scales)})")
    identity = identity_of(rubric, config)
    never_held = set(rubric.aligned.tuned_on) if rubric.aligned else set()
    tune, held = split(items, spec, dimensions[0], never_held)
    least = max(2 * spec.folds, 8)
    if len(tune) < least or len(held) < 5:
        raise AlignError(
            f"not enough ratings to align: {len(items)} rated samples on {', '.join(dimensions)}; an alignment needs "
            f"at least {least} to tune on "
            f"and 5 to hold out ({spec.holdout_share:.0%} held out): rate more first"
        )
    folds = assign_folds(tune, spec, dimensions[0])
    axes = load_axes()[config.mode](rubric, spec, config, dimensions) if config.mode in load_axes() else []
    spend = Spend()
    per_item = max(1, len(rubric.panel.judges) or 1) if backend_for(config).calls_out else 0
    reserve = 2 * len(held) * per_item  # the held-out judging, old and new
    aid = alignment_id(rubric, dimensions, spec, items, identity.id)

    def changes_of(values: dict[str, Any], learn_from: list[Item]) -> Changes:
        changes: Changes = {}
        pick = shots_from(learn_from, rubric, dimensions, spec.seed)
        for a in axes:
            a.apply(changes, values[a.name], pick)
        return changes

    def cross_validated(values: dict[str, Any]) -> dict[str, dict[str, float]]:
        if not any(a.varies_by_fold(values[a.name]) for a in axes):
            return judge(variant(rubric, changes_of(values, tune)), tune, wh, config, spend)
        out: dict[str, dict[str, float]] = {}
        for f in range(spec.folds):
            train = [i for i in tune if folds[i.key] != f]
            test = [i for i in tune if folds[i.key] == f]
            out |= judge(variant(rubric, changes_of(values, train)), test, wh, config, spend)
        return out

    def projected(values: dict[str, Any]) -> int:
        fold_sets = spec.folds if any(a.varies_by_fold(values[a.name]) for a in axes) else 1
        return len(tune) * fold_sets * per_item * max((a.calls_per_item(values[a.name]) for a in axes), default=1)

    tried: list[Tried] = []
    stopped = "every candidate along every axis tried"

    def attempt(values: dict[str, Any]) -> Tried | None:
        nonlocal stopped
        if spec.max_calls and spend.calls + projected(values) + reserve > spec.max_calls:
            stopped = f"the call budget ({spec.max_calls}) would be passed"
            return None
        if spec.max_cost is not None and spend.cost >= spec.max_cost:
            stopped = f"the money budget ({spec.max_cost:g}) is spent"
            return None
        before = Spend(spend.calls, spend.cost)
        scores = cross_validated(values)
        k, lo, hi, rho, per = agreement(rubric, dimensions, tune, scores, seed_of(spec.seed, "cv"))
        t = Tried(
            len(tried),
            dict(values),
            _describe(axes, values),
            k,
            lo,
            hi,
            rho,
            per,
            spend.calls - before.calls,
            spend.cost - before.cost,
        )
        tried.append(t)
        progress(f"candidate {t.index + 1}: {t.label}: cross-validated kappa_q {k:.3f} [{lo:.3f}, {hi:.3f}]")
        return t

    best_values = {a.name: a.values[0] for a in axes}
    best = attempt(best_values)
    if best is None:
        raise AlignError(f"the budget does not cover judging the current judge on {len(tune)} tuning samples")
    since = 0
    for a in axes:
        for value in a.values[1:]:
            if len(tried) >= spec.max_candidates:
                stopped = f"{spec.max_candidates} candidates tried (max_candidates)"
                break
            if since >= spec.patience:
                stopped = f"{spec.patience} candidates in a row without improvement (patience)"
                break
            t = attempt({**best_values, a.name: value})
            if t is None:
                break
            if t.kappa > best.kappa + 1e-12:
                best, best_values, since = t, dict(t.values), 0
            else:
                since += 1
        else:
            continue
        break
    best.changes = changes_of(best.values, tune)
    shown = [str(ex["id"]) for ex in best.changes.get("few_shot", [])]
    new = judge(variant(rubric, best.changes), held, wh, config, spend)
    old = judge(rubric, held, wh, config, spend) if best.index else new
    hk, _, _, hrho, _ = agreement(rubric, dimensions, held, new, seed_of(spec.seed, "held"))
    ok, _, _, orho, _ = agreement(rubric, dimensions, held, old, seed_of(spec.seed, "held"))
    gain, glo, ghi = paired_gain(rubric, dimensions, held, new, old, seed_of(spec.seed, "paired"))
    result = Alignment(
        id=aid,
        rubric=rubric.name,
        dimensions=dimensions,
        from_identity=identity.id,
        from_label=identity.label,
        from_prompt_version=rubric.judge_version,
        tried=tried,
        chosen=best.index,
        items=[(i, SHOWN if i.key in shown else TUNE, folds[i.key]) for i in tune]
        + [(i, HELD_OUT, None) for i in held],
        heldout_kappa=hk,
        heldout_old_kappa=ok,
        heldout_spearman=hrho,
        heldout_old_spearman=orho,
        gain=gain,
        gain_low=glo,
        gain_high=ghi,
        calls=spend.calls,
        cost=spend.cost,
        stopped=stopped,
        shown=shown,
    )
    result.recommended = bool(best.index != 0 and glo > spec.min_gain)
    result.verdict = _verdict(result, len(held), spec.min_gain)
    if result.recommended:
        result.overlay = _overlay(result, rubric, tune)
    return result


def _verdict(a: Alignment, n_held: int, min_gain: float) -> str:
    gain = f"{a.gain:+.3f} [{a.gain_low:+.3f}, {a.gain_high:+.3f}]"
    on = f"on {n_held} held-out samples"
    if a.best.index == 0:
        return f"no candidate beat the current judge in cross-validation ({len(a.tried)} tried): nothing to adopt"
    if a.recommended:
        return (
            f"recommended: {a.best.label}: held-out kappa_q {a.heldout_kappa:.3f} against the current judge's "
            f"{a.heldout_old_kappa:.3f} {on}, gain {gain} (its {LEVEL:.0%} paired interval above "
            f"{min_gain:g})"
        )
    return (
        f"not recommended: the best candidate ({a.best.label}) gains {gain} in kappa_q {on}; the paired interval "
        f"includes no gain, so its cross-validated lead may be tuning noise"
    )


def _overlay(a: Alignment, rubric: RubricConfig, tune: list[Item]) -> Changes:
    """What adopting ``a`` writes: the chosen changes and the record of what the aligned judge was tuned on."""
    over = dict(a.best.changes)
    over["aligned"] = {
        "id": a.id,
        "from_prompt_version": a.from_prompt_version,
        "dimensions": a.dimensions,
        "config": a.best.label,
        "tuned_on": sorted({i.key for i in tune} | (set(rubric.aligned.tuned_on) if rubric.aligned else set())),
        "held_out": sorted(i.key for i, role, _ in a.items if role == HELD_OUT),
    }
    return over


# --- what is stored ------------------------------------------------------------------------------------------------

ALIGNMENT_COLUMNS = [
    "alignment_id", "created_at", "dimensions", "from_identity", "from_label", "candidate", "label", "config",
    "cv_kappa", "cv_kappa_low", "cv_kappa_high", "cv_spearman", "cv_per_dimension", "calls", "cost", "chosen",
    "heldout_kappa", "heldout_old_kappa", "heldout_spearman", "heldout_old_spearman", "gain", "gain_low",
    "gain_high", "n_tune", "n_heldout", "recommended", "verdict", "stopped", "total_calls", "total_cost", "overlay",
]  # fmt: skip
ITEM_COLUMNS = ["alignment_id", "checkpoint_id", "sample_id", "role", "fold"]


def frames(a: Alignment, created_at: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``<rubric>.judge_alignment`` (one row per candidate; the held-out figures and the verdict on the chosen
    one's row and the current judge's) and ``<rubric>.judge_alignment_items`` (each rated sample's role)."""
    n_tune = sum(1 for _, role, _ in a.items if role != HELD_OUT)
    n_held = len(a.items) - n_tune
    rows = []
    for t in a.tried:
        chosen = t.index == a.chosen
        held = chosen or t.index == 0
        rows.append(
            {
                "alignment_id": a.id, "created_at": created_at, "dimensions": ",".join(a.dimensions),
                "from_identity": a.from_identity, "from_label": a.from_label, "candidate": t.index,
                "label": t.label, "config": json.dumps(t.values, sort_keys=True, default=str),
                "cv_kappa": t.kappa, "cv_kappa_low": t.kappa_low, "cv_kappa_high": t.kappa_high,
                "cv_spearman": t.spearman, "cv_per_dimension": json.dumps(t.per_dimension), "calls": t.calls,
                "cost": t.cost, "chosen": chosen,
                "heldout_kappa": (a.heldout_kappa if chosen else a.heldout_old_kappa) if held else math.nan,
                "heldout_old_kappa": a.heldout_old_kappa if chosen else math.nan,
                "heldout_spearman": (a.heldout_spearman if chosen else a.heldout_old_spearman) if held else math.nan,
                "heldout_old_spearman": a.heldout_old_spearman if chosen else math.nan,
                "gain": a.gain if chosen else math.nan, "gain_low": a.gain_low if chosen else math.nan,
                "gain_high": a.gain_high if chosen else math.nan, "n_tune": n_tune, "n_heldout": n_held,
                "recommended": a.recommended and chosen, "verdict": a.verdict if chosen else "",
                "stopped": a.stopped, "total_calls": a.calls, "total_cost": a.cost,
                "overlay": json.dumps(a.overlay, sort_keys=True) if chosen and a.overlay else None,
            }
        )  # fmt: skip
    items = [
        {"alignment_id": a.id, "checkpoint_id": i.checkpoint_id, "sample_id": i.sample_id, "role": role, "fold": fold}
        for i, role, fold in a.items
    ]
    table = pd.DataFrame(rows, columns=ALIGNMENT_COLUMNS).astype({"overlay": "object"})
    return table, pd.DataFrame(items, columns=ITEM_COLUMNS).astype({"fold": "Int64"})
