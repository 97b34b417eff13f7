"""An alignment as people read it (``<rubric>.judge_alignment``): the console's report of ``eval-pipeline align``
and the viewer's ``/align/<rubric>`` pages read the same rows through here."""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field

import pandas as pd

from eval_pipeline.core.contracts import Table
from eval_pipeline.core.ids import check_identifier
from eval_pipeline.core.types import Row
from eval_pipeline.storage.warehouse import Warehouse


@dataclass
class AlignmentView:
    id: str
    rubric: str
    candidates: list[Row]
    chosen: Row
    baseline: Row
    roles: dict[str, int] = field(default_factory=dict)

    @property
    def recommended(self) -> bool:
        return bool(self.chosen.get("recommended"))

    @property
    def overlay(self) -> dict[str, object] | None:
        text = self.chosen.get("overlay")
        return json.loads(str(text)) if isinstance(text, str) and text else None


def _rows(df: pd.DataFrame) -> list[Row]:
    return [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in df.to_dict("records")
    ]


def alignment_ids(wh: Warehouse, rubric: str) -> list[Row]:
    """Every alignment of the rubric, the latest first: its id, when, dimensions, verdict and whether recommended.
    An unsafe rubric name raises UnsafeIdentifierError."""
    check_identifier(rubric, "rubric")
    if not wh.exists() or not wh.table_exists(rubric, Table.JUDGE_ALIGNMENT):
        return []
    df = wh.read(rubric, Table.JUDGE_ALIGNMENT, where={"chosen": True})
    return sorted(_rows(df), key=lambda r: (str(r["created_at"]), str(r["alignment_id"])), reverse=True)


def alignment_view(wh: Warehouse, rubric: str, alignment_id: str) -> AlignmentView | None:
    """One alignment (an id's unique prefix will do), or None."""
    found = [r for r in alignment_ids(wh, rubric) if str(r["alignment_id"]).startswith(alignment_id)]
    if len(found) != 1:
        return None
    aid = str(found[0]["alignment_id"])
    rows = sorted(
        _rows(wh.read(rubric, Table.JUDGE_ALIGNMENT, where={"alignment_id": aid})), key=lambda r: r["candidate"]
    )
    roles: dict[str, int] = {}
    if wh.table_exists(rubric, Table.JUDGE_ALIGNMENT_ITEMS):
        items = wh.read(rubric, Table.JUDGE_ALIGNMENT_ITEMS, where={"alignment_id": aid})
        roles = {str(k): int(v) for k, v in items.role.value_counts().items()}
    chosen = next(r for r in rows if r["chosen"])
    return AlignmentView(aid, rubric, rows, chosen, rows[0], roles)


def _f(x: object, fmt: str = ".3f") -> str:
    if not isinstance(x, (numbers.Real, str)) or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format(float(x), fmt)


def report_lines(v: AlignmentView) -> list[str]:
    """The console's report: what was tried and what it cost, the held-out comparison, and what to do next."""
    c = v.chosen
    lines = [
        f"alignment {v.id} of {v.rubric} on {c['dimensions']} (from {c['from_label']})",
        f"  {c['n_tune']} rated samples tuned on in folds, {c['n_heldout']} held out"
        + (f" ({v.roles.get('shown', 0)} shown to the judge as examples)" if v.roles.get("shown") else ""),
        f"  {len(v.candidates)} candidate(s), {c['total_calls']} judge call(s), cost {_f(c['total_cost'], '.4f')}; "
        f"stopped: {c['stopped']}",
        "  cross-validated kappa_q [95% interval]:",
    ]
    for r in v.candidates:
        mark = "*" if r["chosen"] else " "
        lines.append(
            f"   {mark} {r['candidate'] + 1:>2}. {_f(r['cv_kappa'])} "
            f"[{_f(r['cv_kappa_low'])}, {_f(r['cv_kappa_high'])}]"
            f"  spearman {_f(r['cv_spearman'])}  {r['label']}"
        )
    if c["candidate"] != 0:
        lines.append(
            f"  held out: kappa_q {_f(c['heldout_kappa'])} (aligned) against {_f(c['heldout_old_kappa'])} (current), "
            f"gain {_f(c['gain'], '+.3f')} [{_f(c['gain_low'], '+.3f')}, {_f(c['gain_high'], '+.3f')}] (paired)"
        )
    lines.append(f"  {c['verdict']}")
    lines.append(
        "  kappa_q: quadratic-weighted agreement with the people's scores, 1 = as they scored, 0 = chance; the "
        "held-out figures are on ratings no candidate was tuned on or shown"
    )
    if v.recommended:
        lines.append(f"  adopt it: eval-pipeline align --rubric {v.rubric} --adopt {v.id}")
        lines.append(
            "  then re-judge: eval-pipeline run --rubric " + v.rubric + " (cached answers are not asked again); the "
            "adopted judge is a new judge: its trust is decided afresh, on the held-out ratings and those that come"
        )
    else:
        lines.append(
            "  nothing to adopt: the current judge stays. Next: rate more samples (`make annotate`: more held-out "
            "ratings narrow the gain's interval, so a real gain shows), or give the search more to try (the "
            f"rubric's `align:` block: instructions variants, few_shot counts), then `eval-pipeline align --rubric "
            f"{v.rubric}` again"
        )
    return lines
