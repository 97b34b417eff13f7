"""Any two checkpoints of a rubric side by side, and the checkpoint x rubric matrix of the leaderboard.

The compare page pairs the samples both checkpoints scored (same sample id): per score the two means, the mean
paired change with its t-interval, the shares better and worse; then the samples whose chosen score moved most,
filterable by direction. Two checkpoints judged by different judges are shown, but the page says first that
their changes mix the judge's change with the model's (judge_identity), as the comparison asset refuses to
compute them. Everything is one aggregate query and one ordered, limited query on the scores table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.ids import check_checkpoint_id, check_identifier
from eval_pipeline.publish.viewer.queries.common import records, score_names, tables
from eval_pipeline.storage.warehouse import Warehouse

DIRECTIONS = ("moved", "better", "worse")
MOVED_LIMIT = 50


@dataclass
class ComparePage:
    rubric: str
    a: str
    b: str
    checkpoints: list[str]
    scores: list[dict[str, Any]]
    score: str | None
    direction: str
    moved: list[dict[str, Any]]
    judge_a: str | None = None
    judge_b: str | None = None
    comparable: bool = True
    notes: list[str] = field(default_factory=list)


def _t975(df: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


def compare_page(
    wh: Warehouse,
    config: RubricConfig | None,
    rubric: str,
    a: str,
    b: str,
    score: str | None = None,
    direction: str = "moved",
    limit: int = MOVED_LIMIT,
) -> ComparePage:
    """``b`` against ``a`` (changes are b - a); ``score`` picks the column the moved samples are ranked by
    (default: the rubric's headline, else its first score)."""
    check_identifier(rubric, "rubric name")
    check_checkpoint_id(a)
    check_checkpoint_id(b)
    direction = direction if direction in DIRECTIONS else "moved"
    lower = set(config.lower_is_better) if config else set()
    with wh.session() as s:
        present = tables(s, rubric)
        checkpoints = (
            [r[0] for r in s.query_rows(f'SELECT DISTINCT checkpoint_id FROM "{rubric}".scores ORDER BY 1')]
            if "scores" in present
            else []
        )
        page = ComparePage(rubric, a, b, checkpoints, [], None, direction, [])
        if a not in checkpoints or b not in checkpoints:
            return page
        names = [
            n for n in score_names(s, rubric, b, config, present) if n in score_names(s, rubric, a, config, present)
        ]
        have = set(s.columns(rubric, "scores"))
        names = [n for n in names if n in have]
        if "judge_identity" in present:
            who = dict(
                s.query_rows(
                    f'SELECT checkpoint_id, any_value(label) FROM "{rubric}".judge_identity '
                    "WHERE checkpoint_id IN (?, ?) GROUP BY 1",
                    [a, b],
                )
            )
            page.judge_a, page.judge_b = who.get(a), who.get(b)
            page.comparable = page.judge_a == page.judge_b
        if not names:
            return page
        parts = []
        for n in names:
            c = f'"{check_identifier(n, "score name")}"'
            d = f"(y.{c} - x.{c})"
            better, worse = (f"{d} < 0", f"{d} > 0") if n in lower else (f"{d} > 0", f"{d} < 0")
            parts.append(
                f"count({d}), avg(x.{c}) FILTER (WHERE {d} IS NOT NULL), avg(y.{c}) FILTER (WHERE {d} IS NOT NULL), "
                f"avg({d}), stddev_samp({d}), avg(CASE WHEN {better} THEN 1 WHEN {d} IS NOT NULL THEN 0 END), "
                f"avg(CASE WHEN {worse} THEN 1 WHEN {d} IS NOT NULL THEN 0 END)"
            )
        pairs = (
            f'FROM "{rubric}".scores x JOIN "{rubric}".scores y USING (sample_id) '
            "WHERE x.checkpoint_id = ? AND y.checkpoint_id = ?"
        )
        row = s.query_rows(f"SELECT {', '.join(parts)} {pairs}", [a, b])[0]
        for i, n in enumerate(names):
            cnt, mean_a, mean_b, delta, sd, share_better, share_worse = row[i * 7 : i * 7 + 7]
            half = _t975(int(cnt) - 1) * float(sd) / math.sqrt(int(cnt)) if cnt and cnt > 1 and sd is not None else None
            page.scores.append(
                dict(
                    score=n,
                    n_pairs=int(cnt or 0),
                    mean_a=mean_a,
                    mean_b=mean_b,
                    delta=delta,
                    ci_low=None if half is None else delta - half,
                    ci_high=None if half is None else delta + half,
                    share_better=share_better,
                    share_worse=share_worse,
                    lower_is_better=n in lower,
                    significant=half is not None and (delta - half > 0 or delta + half < 0),
                )
            )
        headline = config.headline if config and config.headline in names else None
        page.score = score if score in names else (headline or names[0])
        c = f'"{page.score}"'
        d = f"(y.{c} - x.{c})"
        lower_better = page.score in lower
        cond = {
            "moved": f"{d} <> 0",
            "better": f"{d} < 0" if lower_better else f"{d} > 0",
            "worse": f"{d} > 0" if lower_better else f"{d} < 0",
        }[direction]
        page.moved = records(
            s.query_df(
                f"SELECT sample_id, x.{c} AS score_a, y.{c} AS score_b, {d} AS delta {pairs} AND {cond} "
                f"ORDER BY abs({d}) DESC, sample_id LIMIT ?",
                [a, b, limit],
            )
        )
    if not page.comparable:
        page.notes.append(
            f"judged by different judges ({page.judge_a or 'unknown'} vs {page.judge_b or 'unknown'}): a change "
            "below mixes the judge's change with the model's; re-judge one with the other's judge to compare them"
        )
    return page


def leaderboard_matrix(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The leaderboard's rows as a checkpoint x rubric matrix: each cell the headline mean, its change against
    the checkpoint's parent (same rubric), and the headline's trend over the checkpoints up to it (creation
    order), drawn as a few block characters."""
    rubrics = sorted({r["rubric"] for r in rows})
    order = sorted({(r.get("created_at") or "", r["checkpoint_id"]) for r in rows})
    ckpts = [c for _, c in order]
    cell = {(r["checkpoint_id"], r["rubric"]): r for r in rows}
    matrix = []
    for i, ck in enumerate(ckpts):
        cells = []
        for rub in rubrics:
            r = cell.get((ck, rub))
            if r is None:
                cells.append(None)
                continue
            parent = cell.get((r.get("parent") or _previous(ckpts, i, rub, cell), rub))
            delta = None
            if parent is not None and r.get("headline") is not None and parent.get("headline") is not None:
                delta = float(r["headline"]) - float(parent["headline"])
            history = [cell[(c, rub)]["headline"] for c in ckpts[: i + 1] if (c, rub) in cell]
            cells.append(dict(mean=r.get("headline"), delta=delta, trend=spark(history), name=r.get("headline_name")))
        matrix.append(
            dict(checkpoint_id=ck, model=next(r.get("model") for r in rows if r["checkpoint_id"] == ck), cells=cells)
        )
    return dict(rubrics=rubrics, rows=matrix)


def _previous(ckpts: list[str], i: int, rubric: str, cell: dict) -> str | None:
    for c in reversed(ckpts[:i]):
        if (c, rubric) in cell:
            return c
    return None


_BLOCKS = "▁▂▃▄▅▆▇█"


def spark(values: list[Any]) -> str:
    """A trend line of block characters, scaled to the values' own range (the last eight)."""
    vals = [float(v) for v in values[-8:] if v is not None]
    if len(vals) < 2:
        return ""
    lo, hi = min(vals), max(vals)
    if hi == lo:
        return _BLOCKS[3] * len(vals)
    return "".join(_BLOCKS[round((v - lo) / (hi - lo) * (len(_BLOCKS) - 1))] for v in vals)
