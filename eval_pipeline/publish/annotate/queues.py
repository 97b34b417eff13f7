"""What each evaluator rates next, from the protocol the rubric declares (its ``worklists`` block), and the pilot's
calibration once two evaluators have finished it.

Queues of one checkpoint, for one evaluator:

* ``pilot``: the seeded, stratified pilot set (``worklists.pilot_size``, ``strata``); every pilot evaluator rates
  every item, each blind to the others.
* ``remainder``: the other samples, one evaluator each: an item leaves the queue once anybody rated it.
* ``spot_check``: the protocol's share (``spot_check_share``) of the remainder items somebody else rated, for a
  second rating.
* ``rereview``: items where this evaluator's score and another's differ by more than ``rereview.max_diff``.

A rubric that declares no ``worklists`` block gets one ``sample`` queue: a seeded, stratified sample of the
checkpoint (``DEFAULT_SAMPLE`` items), said as such on the page.

The calibration numbers come from the project's own agreement code (``agreement.compute``) over the pilot
evaluators' ratings of the pilot items, so they equal the ``agreement`` table's rows for that pair.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

import pandas as pd

from eval_pipeline.agreement.compute import compute_agreement, rater_sets
from eval_pipeline.agreement.pass_fail import pass_fail_pairs
from eval_pipeline.agreement.plan import DEFAULT_SAMPLE, Plan, declares_protocol
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import rater_pair
from eval_pipeline.core.derived import per_rater
from eval_pipeline.core.types import Row
from eval_pipeline.publish.worklists import rereview


@dataclass
class Queue:
    kind: str
    title: str
    items: list[str]
    done: set[str] = field(default_factory=set)  # done by this evaluator (or, for the remainder, by anybody)
    note: str = ""
    positions: dict[str, int] | None = None  # item -> its place in ``items`` (the remainder's: 100k items)

    @property
    def total(self) -> int:
        return len(self.items)

    def next_item(self, after: str | None = None, skipped: set[str] | None = None) -> str | None:
        """The first item not done (and not skipped), after ``after`` when given, else from the start."""
        return next(self.candidates(after, skipped), None)

    def candidates(self, after: str | None = None, skipped: set[str] | None = None) -> Iterator[str]:
        """The items not done (and not skipped) in the queue's order, from after ``after`` round to it."""
        skipped = skipped or set()
        if self.positions is not None:
            start = self.positions[after] + 1 if after in self.positions else 0
        else:
            start = self.items.index(after) + 1 if after in self.items else 0
        for sid in itertools.chain(self.items[start:], self.items[:start]):
            if sid not in self.done and sid not in skipped:
                yield sid


def rated_by(ratings: pd.DataFrame) -> dict[str, set[str]]:
    """sample id -> the evaluators with at least one score for it (long ratings: sample_id, evaluator, score)."""
    out: dict[str, set[str]] = {}
    if ratings.empty:
        return out
    scored = ratings[ratings.score.notna()]
    for sid, who in zip(scored.sample_id, scored.evaluator):
        out.setdefault(str(sid), set()).add(str(who))
    return out


def queues(
    plan: Plan, ratings: pd.DataFrame, evaluator: str, skipped: set[str], only: str | None = None
) -> list[Queue]:
    """This evaluator's queues (``ratings``: every evaluator's current ratings of the checkpoint, long form);
    ``only``: that queue alone (the others are not worked out)."""
    rubric = plan.rubric
    who = rated_by(ratings)
    mine = {sid for sid, names in who.items() if evaluator in names} | skipped
    if not declares_protocol(rubric):
        note = (
            f"This rubric declares no rating protocol (no worklists block): a seeded sample of {DEFAULT_SAMPLE} "
            "samples, stratified by its categorical fields."
        )
        return [Queue("sample", "Sample", plan.sample, {s for s in plan.sample if s in mine}, note)]
    spec = rubric.worklists
    pilot_note = "Every pilot evaluator rates every item, blind to the others."
    if spec.pilot_evaluators:
        pilot_note += f" Named for it: {', '.join(spec.pilot_evaluators)}."
    out = [Queue("pilot", "Pilot", plan.pilot, {s for s in plan.pilot if s in mine}, pilot_note)]
    if only == "pilot":
        return out
    # from the rated and skipped ids, not by walking the remainder: it may hold 100,000 items
    anybody = {sid for sid in who if sid in plan.remainder_at}
    out.append(
        Queue(
            "remainder",
            "Remainder (one evaluator each)",
            plan.remainder,
            anybody | {s for s in skipped if s in plan.remainder_at},
            "After the pilot's calibration, one evaluator rates the rest: an item leaves the queue once rated.",
            positions=plan.remainder_at,
        )
    )
    if only == "remainder":
        return out
    others = sorted(s for s in anybody if who.get(s, set()) - {evaluator})
    k = max(1, math.ceil(len(others) * spec.spot_check_share)) if others else 0
    chosen = sorted(random.Random(spec.seed + 1).sample(others, k)) if k else []
    out.append(
        Queue(
            "spot_check",
            f"Spot check ({spec.spot_check_share:.0%} of what others rated)",
            chosen,
            {s for s in chosen if s in mine},
            "A second rating of a share of the remainder, to verify consistency.",
        )
    )
    if spec.rereview is not None and only in (None, "rereview"):
        diffs = discrepancies(rubric, ratings)
        listed = sorted({r["sample_id"] for r in diffs if evaluator in (r["evaluator_a"], r["evaluator_b"])})
        out.append(
            Queue(
                "rereview",
                f"Re-review (|{spec.rereview.score} difference| > {spec.rereview.max_diff:g})",
                listed,
                set(),
                "Items where your score and another evaluator's differ past the protocol's discrepancy: discuss, "
                "then rate again if you change your mind.",
            )
        )
    return out


def discrepancies(rubric: RubricConfig, ratings: pd.DataFrame) -> list[Row]:
    """Pairs of evaluators whose ``rereview.score`` differs by more than ``max_diff`` on an item."""
    humans = ratings[ratings.rater_kind == "human"] if "rater_kind" in ratings.columns else ratings
    if humans.empty:
        return []
    return list(rereview(rubric, humans).to_dict("records"))


@dataclass
class Calibration:
    """The pilot compared once two or more evaluators finished it."""

    evaluators: list[str]
    items: list[Row]  # sample_id, then per dimension each evaluator's score
    dimensions: list[str]
    discrepant: list[Row]
    pass_fail: list[Row]  # raters, value, band, meaning
    weighted: list[Row]  # dimension, raters, value (quadratic-weighted kappa)
    agreement: pd.DataFrame


def band(rubric: RubricConfig, kappa: float | None) -> tuple[str, str]:
    """(band, what it means) for a pilot kappa, by the rubric's calibration bands."""
    b = rubric.worklists.bands
    if kappa is None or kappa != kappa:
        return "undefined", "kappa is undefined on these ratings (one category only): look at the items"
    if kappa >= b.proceed:
        return "proceed", f"kappa >= {b.proceed:g}: excellent agreement, proceed to the full evaluation"
    if kappa >= b.discuss:
        return "discuss", (
            f"kappa {b.discuss:g}-{b.proceed:g}: good agreement; discuss the discrepancies, refine the rubric, "
            "optionally re-pilot"
        )
    return "revise", f"kappa < {b.discuss:g}: poor agreement; revise the rubric, train, re-pilot"


def finished_pilot(plan: Plan, ratings: pd.DataFrame) -> list[str]:
    """The evaluators who rated every pilot item (named ones only, when the rubric names them)."""
    who = rated_by(ratings)
    names = sorted({n for sid in plan.pilot for n in who.get(sid, set())})
    named = plan.rubric.worklists.pilot_evaluators
    if named:
        names = [n for n in names if n in named]
    return [n for n in names if all(n in who.get(sid, set()) for sid in plan.pilot)]


def calibration(plan: Plan, ratings: pd.DataFrame, checkpoint_id: str) -> Calibration | None:
    """The pilot's calibration, or None until two evaluators have finished it."""
    rubric = plan.rubric
    done = finished_pilot(plan, ratings)
    if len(done) < 2 or not plan.pilot:
        return None
    pilot = ratings[ratings.sample_id.isin(plan.pilot) & ratings.evaluator.isin(done)]
    agreement = compute_agreement(rubric, checkpoint_id, pilot, None)
    dims = list(rubric.rating_scales)
    table = pilot.pivot_table(index="sample_id", columns=["dimension", "evaluator"], values="score", aggfunc="last")
    items = []
    for sid in plan.pilot:
        row: Row = {"sample_id": sid, "differs": {}}
        for d in dims:
            row[d] = {e: _cell(table, sid, d, e) for e in done}
            row["differs"][d] = len({v for v in row[d].values() if v is not None}) > 1
        items.append(row)
    pass_fail = pass_fail_view(rubric, pilot, agreement)
    quad = agreement[(agreement.statistic == "cohen_kappa_quadratic") & agreement.raters.str.contains("~")]
    weighted = [{"dimension": r.dimension, "raters": r.raters, "value": r.value} for r in quad.itertuples()]
    humans = pilot.copy()
    discrepant = discrepancies(rubric, humans) if rubric.worklists.rereview else []
    return Calibration(done, items, dims, discrepant, pass_fail, weighted, agreement)


def pass_fail_view(rubric: RubricConfig, pilot: pd.DataFrame, agreement: pd.DataFrame) -> list[Row]:
    """Per pair of pilot evaluators: the pass/fail kappa with its band, and beside it what kappa alone can
    mislead about: the share of items they agree on, each one's PASS share (prevalence) and Gwet's AC1. The
    band's advice says so when kappa is low because nearly every item falls on one side."""
    pf = rubric.human_ratings.pass_fail
    if pf is None or pilot.empty:
        return []
    kappas = agreement[agreement.statistic.str.startswith("pass_fail_kappa")].set_index("raters")
    ac1 = agreement[agreement.statistic.str.startswith("pass_fail_ac1")].set_index("raters")
    per = per_rater(rubric, rater_sets(rubric, pilot)["human"], pf.score, ["checkpoint_id", "sample_id"])
    out: list[Row] = []
    for e1, e2, a, b in pass_fail_pairs(rubric, per):
        raters = rater_pair(e1, e2)
        if raters not in kappas.index:
            continue
        k = float(kappas.at[raters, "value"])
        g = float(ac1.at[raters, "value"]) if raters in ac1.index else float("nan")
        agree = float((a == b).mean())
        name, meaning = band(rubric, k)
        skewed = max(a.mean(), 1 - a.mean(), b.mean(), 1 - b.mean()) >= 0.8
        order = ("undefined", "revise", "discuss", "proceed")
        by_ac1 = band(rubric, g)[0]
        if skewed and order.index(by_ac1) > order.index(name):
            meaning = (
                f"kappa is low largely because nearly every item falls on one side (prevalence), not only because "
                f"you disagree: you agree on {agree:.0%} of items and AC1 is {g:.2f} (the {by_ac1!r} band); discuss "
                "the items you differ on and add pilot items from the rarer side before revising the rubric"
            )
        out.append(
            {
                "raters": raters,
                "statistic": str(kappas.at[raters, "statistic"]),
                "value": k,
                "band": name,
                "meaning": meaning,
                "percent_agreement": agree,
                "prevalence": {e1: float(a.mean()), e2: float(b.mean())},
                "ac1": g,
            }
        )
    return out


def _cell(table: pd.DataFrame, sid: str, dim: str, evaluator: str) -> float | None:
    try:
        v = table.at[sid, (dim, evaluator)]
    except KeyError:
        return None
    return None if v != v else float(v)
