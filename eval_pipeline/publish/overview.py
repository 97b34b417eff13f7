"""The first screen of the viewer and of the report, from the stored verdicts (``main.verdicts``) and rank sets
alone: which checkpoint ranks where, what regressed, whether the judge can be trusted. Nothing here decides a
verdict or a rank again."""

from __future__ import annotations

from dataclasses import dataclass, field

from eval_pipeline.core.contracts import Table
from eval_pipeline.core.types import Row
from eval_pipeline.scoring.verdict import TABLE, Verdict, read, regression_text, worst
from eval_pipeline.storage.warehouse import Warehouse

# a verdict's colour class, the same in the viewer and the report
TONE = {
    "incomplete": "incomplete",
    "pending judge": "pending",
    "regressed": "bad",
    "failed gates": "bad",
    "judge untrusted": "warn",
    "pending ratings": "pending",
    "passed": "good",
}


@dataclass
class Overview:
    rubrics: list[str] = field(default_factory=list)
    checkpoints: list[Row] = field(default_factory=list)  # checkpoint_id, model, created_at, verdict
    cells: dict[tuple[str, str], Verdict] = field(default_factory=dict)  # (checkpoint, rubric)
    # (checkpoint, rubric) -> its rank set among the checkpoints the same judge judged ("1–2 of 3, tied with …",
    # scoring.ranks: decided once, stored in <rubric>.ranks)
    ranks: dict[tuple[str, str], str] = field(default_factory=dict)
    best_overall: str | None = None  # the newest checkpoint that passed on every rubric (None: none did)
    regressions: list[Row] = field(default_factory=list)  # rubric, checkpoint, text, score, parent
    trust: list[Verdict] = field(default_factory=list)  # each rubric's newest verdict: its judge's trust

    def cell(self, checkpoint: str, rubric: str) -> Verdict | None:
        return self.cells.get((checkpoint, rubric))


def _signed(v: Verdict) -> float:
    """The headline with larger meaning better (a lower-is-better score negated)."""
    h = float(v.headline if v.headline is not None else float("-inf"))
    return -h if v.headline_lower_is_better else h


def overview(wh: Warehouse) -> Overview:
    """Every stored verdict, arranged for the first screen."""
    out = Overview()
    with wh.session() as s:
        if not s.table_exists("main", "checkpoints"):
            return out
        rubrics = sorted(schema for schema, _ in s.tables([TABLE]) if schema != "main")
        ckpts = s.read(
            "main",
            "checkpoints",
            columns=("checkpoint_id", "model", "created_at"),
            order_by=("created_at", "checkpoint_id"),
        )
        verdicts = [v for r in rubrics for v in read(s, r)]
        for r in rubrics:
            if s.table_exists(r, Table.RANKS):
                for ck, shown in s.read(r, Table.RANKS, columns=("checkpoint_id", "rank_set")).itertuples(index=False):
                    out.ranks[(str(ck), r)] = str(shown)
    out.rubrics = rubrics
    for v in verdicts:
        out.cells[(v.checkpoint_id, v.rubric)] = v
    seen = {v.checkpoint_id for v in verdicts}
    for c in ckpts.to_dict("records"):
        if c["checkpoint_id"] not in seen:
            continue
        named = [v.verdict for v in verdicts if v.checkpoint_id == c["checkpoint_id"]]
        out.checkpoints.append({**c, "created_at": str(c["created_at"] or ""), "verdict": worst(named)})
    order = [c["checkpoint_id"] for c in out.checkpoints]
    for r in rubrics:
        mine = [v for v in verdicts if v.rubric == r and v.checkpoint_id in order]
        if mine:
            out.trust.append(max(mine, key=lambda v: order.index(v.checkpoint_id)))
    passed = [c["checkpoint_id"] for c in out.checkpoints if c["verdict"] == "passed"]
    if passed:  # "best" is said only of a checkpoint that passed everywhere: the newest of those
        out.best_overall = max(passed, key=order.index)
    for ck in reversed(order):  # newest first
        for r in rubrics:
            cell = out.cells.get((ck, r))
            if cell is None or cell.verdict != "regressed":
                continue
            for reg in cell.regressions:
                out.regressions.append(
                    {
                        "rubric": r,
                        "checkpoint": ck,
                        "parent": reg["parent"],
                        "score": reg["score"],
                        "sample_score": str(reg["score"]).removesuffix("_calibrated"),
                        "calibrated": reg["calibrated"],
                        "lower_is_better": reg["lower_is_better"],
                        "text": regression_text(reg),
                    }
                )
    return out
