"""A checkpoint's item lists for people to rate: which items its evaluators are given, and with what chance each
rated item was drawn (#72.7: read by the annotate queues and by the calibration pool alike, so
``defs/assets/pools.py`` imports nothing from ``publish/``; the design's mathematics is ``agreement.design``).

* ``pilot_set``: the seeded, stratified pilot every pilot evaluator rates (or, for a rubric without a rating
  protocol, the seeded sample of ``DEFAULT_SAMPLE`` items).
* ``Plan``: a checkpoint's item lists: the pilot, and the remainder, ordered by the active queue (an order sample,
  ``agreement.design``) where the judge reports how sure it is, else shuffled with the protocol's seed.
* ``inclusion``: each rated item's inclusion probability under that order, the weights the estimators
  (``agreement.sequential``'s active-inference sequences, ``agreement.ppi``) divide by.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pandas as pd

from eval_pipeline.agreement import active, design
from eval_pipeline.agreement.trust import judge_bar
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.storage.warehouse import Warehouse

DEFAULT_SAMPLE = 30


def pilot_set(rubric: RubricConfig, samples: pd.DataFrame, seed: int) -> pd.DataFrame:
    spec = rubric.worklists
    rng = random.Random(seed)
    id_col = rubric.inputs.id_field
    strata = spec.strata or []
    if strata:
        groups = [list(g[id_col]) for _, g in samples.groupby(strata, dropna=False, sort=True)]
    else:
        groups = [list(samples[id_col])]
    for g in groups:
        rng.shuffle(g)
    rng.shuffle(groups)
    picked: list[str] = []
    for batch in itertools.zip_longest(*groups):
        for sid in batch:
            if sid is not None and len(picked) < spec.pilot_size:
                picked.append(sid)
    out = samples.set_index(id_col).loc[picked].reset_index()
    return out[[id_col, *strata]].rename(columns={id_col: "sample_id"})


def declares_protocol(rubric: RubricConfig) -> bool:
    return "worklists" in rubric.model_fields_set


class Plan:
    """The item lists of one checkpoint: seeded, so every evaluator and every process gets the same ones."""

    def __init__(self, rubric: RubricConfig, samples: pd.DataFrame, uncertainty: dict[str, float] | None = None):
        """``uncertainty``: how much a rating of each sample would narrow the judge's open decisions (agreement.active
        .decision_uncertainty); with it,
        and the protocol's ``active`` on, the remainder is ordered by it (an order sample: the inclusion
        probability of every rated item is known), else shuffled with the protocol's seed."""
        self.rubric = rubric
        id_col = rubric.inputs.id_field
        ids = [str(s) for s in samples[id_col]]
        seed = rubric.worklists.seed
        self.why: dict[str, str] = {}
        self.weights: dict[str, float] = {}
        self.keys = np.zeros(0)
        if declares_protocol(rubric):
            self.pilot = [str(s) for s in pilot_set(rubric, samples, seed).sample_id] if len(samples) else []
            pilot = set(self.pilot)
            rest = [s for s in ids if s not in pilot]
            spec = rubric.worklists
            known = {s: uncertainty[s] for s in rest if uncertainty and s in uncertainty}
            if spec.active and any(v > 0 for v in known.values()):
                u = np.array([known.get(s, math.nan) for s in rest])
                w = active.priorities(u, spec.active_floor)
                self.weights = dict(zip(rest, w.tolist(), strict=True))
                rest, keys = design.order(rest, w, seed + 2)
                self.keys = keys
                for s in rest:
                    share = self.weights[s]
                    self.why[s] = (
                        f"the judge is unsure of it where that weighs on its agreement ({share:.1f}x the average "
                        "item's chance)"
                        if share > 1
                        else f"drawn at random to keep every item's chance ({share:.1f}x the average)"
                    )
            else:
                random.Random(seed + 2).shuffle(rest)
            self.remainder = rest
            self.remainder_at = {sid: k for k, sid in enumerate(rest)}
            self.sample: list[str] = []
        else:
            strata = [f.name for f in rubric.inputs.fields if f.allowed][:2]
            spec = rubric.worklists.model_copy(update={"strata": strata, "pilot_size": DEFAULT_SAMPLE})
            sub = rubric.model_copy(update={"worklists": spec})
            self.sample = [str(s) for s in pilot_set(sub, samples, seed).sample_id] if len(samples) else []
            self.pilot, self.remainder = [], []
            self.remainder_at = {}
        self.ids = set(ids)


def load_plan(wh: Warehouse, rubric: RubricConfig, ckpt: str) -> Plan:
    """The checkpoint's plan from the warehouse: its samples (ids and the fields the strata need) and, once it
    was judged, how much a rating of each would narrow the trust decisions (agreement.active.decision_uncertainty:
    the judge's spread on it where it weighs on kappa)."""
    cols = [rubric.inputs.id_field, *rubric.worklists.strata, *[f.name for f in rubric.inputs.fields if f.allowed]]
    cols = list(dict.fromkeys(cols))
    samples = wh.read(rubric.name, Table.SAMPLES, columns=cols, where={"checkpoint_id": ckpt}, order_by=cols[:1])
    uncertainty: dict[str, float] = {}
    try:
        if declares_protocol(rubric) and rubric.worklists.active and wh.table_exists(rubric.name, Table.JUDGE_SCORES):
            cols_j = ("sample_id", "judge", "kind", "dimension", "score", "score_distribution")
            judged = wh.read(rubric.name, Table.JUDGE_SCORES, columns=cols_j, where={"checkpoint_id": ckpt})
            uncertainty = active.decision_uncertainty(judged, judge_bar(rubric).kappa)
    except Exception:  # noqa: BLE001 - a warehouse being written for the first time: not judged yet
        uncertainty = {}
    return Plan(rubric, samples, uncertainty)


def inclusion(plan: Plan, rated: set[str], drawn_share: float = 0.8) -> dict[str, float] | None:
    """Each rated sample's inclusion probability under the active queue, or None when the remainder is not
    ordered by it or the ratings were not drawn by it (fewer than ``drawn_share`` of the rated remainder items lie
    before its first unrated item: a CSV of some other sample, say): pilot items 1 (the pilot is a fixed set, all
    rated), the remainder's ``min(1, tau * w)`` with ``tau`` the key of its first unrated item; rated items past
    that one are left out."""
    if not plan.weights:
        return None
    rest = [s for s in plan.remainder if s in rated]
    first = next((k for k, s in enumerate(plan.remainder) if s not in rated), len(plan.remainder))
    if rest and first < drawn_share * len(rest):
        return None
    tau = float(plan.keys[first]) if first < len(plan.remainder) else math.inf
    prefix = plan.remainder[:first]
    pi = design.inclusion(plan.keys[:first], np.array([plan.weights[s] for s in prefix]), tau)
    out = {s: 1.0 for s in plan.pilot if s in rated}
    out.update(dict(zip(prefix, pi.tolist(), strict=True)))
    return out
