"""The checkpoint x rubric page: per-score means against the parent, distributions, gates, agreement, quarantine."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from eval_pipeline.core import settings
from eval_pipeline.core.contracts import ALL_CHECKPOINTS, Table
from eval_pipeline.core.ids import check_identifier
from eval_pipeline.core.types import Row
from eval_pipeline.ingest.ratings import stale as stale_ratings
from eval_pipeline.publish.viewer.queries.common import (
    columns,
    records,
    tables,
)
from eval_pipeline.scoring.comparison import parent_of
from eval_pipeline.scoring.verdict import Verdict
from eval_pipeline.scoring.verdict import read as read_verdicts
from eval_pipeline.storage.warehouse import Warehouse


@dataclass
class CheckpointPage:
    rubric: str
    checkpoint: str
    parent: str | None
    checkpoint_info: Row | None
    scores: list[Row]  # summary 'all' rows joined with the comparison
    breakdowns: list[Row]
    distributions: dict[str, list[Row]]
    gates: list[Row]
    agreement: list[Row]
    quarantine: list[Row]
    quarantine_total: int
    headline: str | None
    length_bias: list[Row] = field(default_factory=list)
    repeatability: list[Row] = field(default_factory=list)
    usage: list[Row] = field(default_factory=list)  # what each judge step cost (judge_usage)
    verdict: Verdict | None = None  # the stored verdict (scoring.verdict), never decided here
    stale: bool = False  # rating files changed since this checkpoint's ratings were read: the verdict is owed again


def _frame(s: Warehouse, present: set[str], rubric: str, table: str, ckpt: str, order: str = "") -> pd.DataFrame:
    """The checkpoint's rows of ``rubric.table`` (``order``: an ORDER BY column), empty when there is no such table."""
    if table not in present:
        return pd.DataFrame()
    by = f" ORDER BY {order}" if order else ""
    return s.query_df(f'SELECT * FROM "{rubric}".{table} WHERE checkpoint_id = ?{by}', [ckpt])


def _quarantine(s: Warehouse, rubric: str, ckpt: str, limit: int) -> tuple[int, list[Row]]:
    """How many of the checkpoint's lines and rating rows were quarantined, and the first ``limit`` of them."""
    if not s.table_exists("main", "quarantine"):
        return 0, []
    total = s.query_rows("SELECT count(*) FROM main.quarantine WHERE rubric = ? AND checkpoint_id = ?", [rubric, ckpt])
    shown = s.query_df(
        "SELECT source_file, line_number, stage, reason, raw_line FROM main.quarantine "
        "WHERE rubric = ? AND checkpoint_id = ? ORDER BY stage, line_number LIMIT ?",
        [rubric, ckpt, limit],
    )
    return int(total[0][0]), records(shown)


def checkpoint_page(wh: Warehouse, rubric: str, ckpt: str, quarantine_limit: int = 200) -> CheckpointPage:
    check_identifier(rubric, "rubric name")
    with wh.session() as s:
        present = tables(s, rubric)
        parent = parent_of(s, ckpt)  # the parent the comparison used
        info = records(s.query_df("SELECT * FROM main.checkpoints WHERE checkpoint_id = ?", [ckpt]))
        summary = _frame(s, present, rubric, "summary", ckpt)
        comparison = _frame(s, present, rubric, "comparison", ckpt)
        names = list(summary[summary.breakdown == "all"].score) if len(summary) else []
        distributions = _distributions(s, rubric, ckpt, names) if "scores" in present else {}
        gates = records(_frame(s, present, rubric, "gates", ckpt, "gate"))
        agreement = (
            records(
                s.query_df(
                    f'SELECT * FROM "{rubric}".agreement WHERE checkpoint_id IN (?, ?) '
                    "ORDER BY checkpoint_id = ?, dimension, statistic, raters",
                    [ckpt, ALL_CHECKPOINTS, ALL_CHECKPOINTS],
                )
            )
            if "agreement" in present
            else []
        )
        length = records(_frame(s, present, rubric, "length_bias", ckpt))
        repeat = records(_frame(s, present, rubric, "judge_repeatability", ckpt))
        usage = records(_frame(s, present, rubric, "judge_usage", ckpt, "step"))
        decided = read_verdicts(s, rubric, [ckpt]) if "verdict" in present else []
        owed = bool(decided) and bool(stale_ratings(s, rubric, settings.ratings_dir(), only=[ckpt])[1])
        q_total, quarantine = _quarantine(s, rubric, ckpt, quarantine_limit)
    overall = summary[summary.breakdown == "all"] if len(summary) else summary
    comp = {r["score"]: r for r in records(comparison)} if len(comparison) else {}
    scores = []
    for r in records(overall):
        c = comp.get(r["score"], {})
        # a judged dimension's human-calibrated change, beside its raw one (the one a regression may rest on)
        calibrated = comp.get(f"{r['score']}_calibrated") or None
        scores.append({**r, Table.COMPARISON: c or None, "calibrated": calibrated})
    breakdowns = records(summary[summary.breakdown != "all"]) if len(summary) else []
    headline = next((r["score"] for r in scores if r.get("headline")), None)
    return CheckpointPage(
        rubric,
        ckpt,
        parent,
        info[0] if info else None,
        scores,
        breakdowns,
        distributions,
        gates,
        agreement,
        quarantine,
        int(q_total),
        headline,
        length,
        repeat,
        usage,
        decided[0] if decided else None,
        owed,
    )


def _distributions(wh: Warehouse, rubric: str, ckpt: str, names: list[str]) -> dict[str, list[Row]]:
    """Per score: counts per value when it takes few values (a rating scale), else ten equal bins."""
    cols = {c for c, _ in columns(wh, rubric, Table.SCORES)}
    out: dict[str, list[Row]] = {}
    for name in names:
        if name not in cols:
            continue
        check_identifier(name, "score name")
        q = f'SELECT "{name}"::DOUBLE AS v FROM "{rubric}".scores WHERE checkpoint_id = ? AND "{name}" IS NOT NULL'
        distinct = wh.query_rows(f"SELECT count(DISTINCT v), min(v), max(v) FROM ({q})", [ckpt])[0]
        n_distinct, lo, hi = distinct
        if not n_distinct:
            out[name] = []
            continue
        if n_distinct <= 12:
            rows = wh.query_rows(f"SELECT v, count(*) FROM ({q}) GROUP BY v ORDER BY v", [ckpt])
            out[name] = [{"label": _fmt(v), "count": int(n)} for v, n in rows]
        else:
            width = (hi - lo) / 10 or 1.0
            rows = wh.query_rows(
                f"SELECT least(floor((v - ?) / ?), 9)::INT AS b, count(*) FROM ({q}) GROUP BY b ORDER BY b",
                [lo, width, ckpt],
            )
            counts = dict(rows)
            out[name] = [
                {"label": f"{_fmt(lo + i * width)}–{_fmt(lo + (i + 1) * width)}", "count": int(counts.get(i, 0))}
                for i in range(10)
            ]
    return out


def _fmt(v: float) -> str:
    return f"{v:g}" if abs(v) >= 1000 or float(v).is_integer() else f"{v:.3g}"


def checkpoint_table(wh: Warehouse, rubric: str, ckpt: str, name: str) -> list[Row] | None:
    """Every row of the rubric's table ``name`` for the checkpoint (a download of what the page shows), or None
    when the rubric has no such table with a checkpoint column."""
    check_identifier(rubric, "rubric name")
    check_identifier(name, "table name")
    with wh.session() as s:
        if name not in tables(s, rubric) or "checkpoint_id" not in s.columns(rubric, name):
            return None
        return records(s.query_df(f'SELECT * FROM "{rubric}"."{name}" WHERE checkpoint_id = ?', [ckpt]))
