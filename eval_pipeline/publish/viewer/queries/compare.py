"""Any two checkpoints of a rubric side by side, and the trend line of a score.

The compare page pairs the samples both checkpoints scored (same sample id): per score the two means, the mean
paired change with its t-interval, the shares better and worse; then the samples whose chosen score moved most,
filterable by direction; above them, the pipeline's own test of the pair (stored where a is b's parent,
computed for any other pair: scoring.compared). Two checkpoints judged by different judges are shown, but the
page says first that
their changes mix the judge's change with the model's (judge_identity), as the comparison asset refuses to
compute them. Everything is one aggregate query and one ordered, limited query on the scores table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.distributions import t_ppf
from eval_pipeline.core.ids import check_checkpoint_id, check_identifier
from eval_pipeline.core.types import Row
from eval_pipeline.publish.viewer.queries.common import rank, tables
from eval_pipeline.scoring.compared import compared
from eval_pipeline.scoring.comparison import NOT_COMPARABLE
from eval_pipeline.storage.warehouse import Warehouse

DIRECTIONS = ("moved", "better", "worse")
MOVED_LIMIT = 50


@dataclass
class ComparePage:
    rubric: str
    a: str
    b: str
    checkpoints: list[str]
    scores: list[Row]
    score: str | None
    direction: str
    moved: list[Row]
    judge_a: str | None = None
    judge_b: str | None = None
    comparable: bool = True
    # the pipeline's own comparison of b against a, when a is b's parent: its rows (the human-calibrated changes
    # among them), the same rows the verdict and the checkpoint page read
    tested: list[Row] = field(default_factory=list)
    tested_stored: bool = True  # the stored comparison (a is b's parent); else computed now for this pair
    notes: list[str] = field(default_factory=list)


def _t975(df: int) -> float:
    return t_ppf(0.975, df)


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
        # the checkpoints and the scores both have, from the summary (a few rows each), not the scores table
        summarised = (
            s.query_rows(f"SELECT checkpoint_id, score FROM \"{rubric}\".summary WHERE breakdown = 'all'")
            if "summary" in present and "scores" in present
            else []
        )
        page = ComparePage(rubric, a, b, sorted({str(c) for c, _ in summarised}), [], None, direction, [])
        if a not in page.checkpoints or b not in page.checkpoints:
            return page
        of_a = {str(n) for c, n in summarised if c == a}
        # the scores both summarised that are columns of the scores table (a summary also has shares of a status,
        # named "<score>=<value>", which are no column to pair)
        score_cols = set(s.columns(rubric, Table.SCORES))
        names = sorted(
            {str(n) for c, n in summarised if c == b and n in of_a and n in score_cols},
            key=lambda n: (rank(config, n), n),
        )
        _judges_and_test(s, present, config, page)
        if not names:
            return page
        # the pairs fetched once, as Arrow (one join); the changes, intervals and the samples that moved are
        # computed from them in numpy: one scan of the scores table, and only the ids shown become Python text
        cols = ", ".join(f'x."{check_identifier(n, "score name")}" AS "a_{n}", y."{n}" AS "b_{n}"' for n in names)
        pairs = s.query_arrow(
            f'SELECT sample_id, {cols} FROM "{rubric}".scores x JOIN "{rubric}".scores y USING (sample_id) '
            "WHERE x.checkpoint_id = ? AND y.checkpoint_id = ?",
            [a, b],
        )
    columns = {n: _paired(pairs, n) for n in names}
    page.scores = [_change(n, *columns[n], n in lower) for n in names]
    headline = config.headline if config and config.headline in names else None
    page.score = score if score in names else (headline or names[0])
    page.moved = _moved(pairs, *columns[page.score], page.score in lower, direction, limit)
    return page


def _judges_and_test(s: Warehouse, present: set[str], config: RubricConfig | None, page: ComparePage) -> None:
    """Who judged each side (``page.comparable`` when one judge judged both), and the pair's test: the stored
    comparison where ``b``'s parent is ``a``, else the pipeline's own test of the pair (scoring.compared)."""
    rubric = page.rubric
    if "judge_identity" in present:
        who = dict(
            s.query_rows(
                f'SELECT checkpoint_id, any_value(label) FROM "{rubric}".judge_identity '
                "WHERE checkpoint_id IN (?, ?) GROUP BY 1",
                [page.a, page.b],
            )
        )
        page.judge_a, page.judge_b = who.get(page.a), who.get(page.b)
        page.comparable = page.judge_a == page.judge_b
    if not page.comparable:
        page.notes.append(
            f"judged by different judges ({page.judge_a or 'unknown'} vs {page.judge_b or 'unknown'}): a change "
            "below mixes the judge's change with the model's; re-judge one with the other's judge to compare them"
        )
    if "comparison" in present:
        tested = s.query_df(
            f'SELECT * FROM "{rubric}".comparison WHERE checkpoint_id = ? AND parent_id = ? ORDER BY score',
            [page.b, page.a],
        )
    else:
        tested = pd.DataFrame()
    if tested.empty and page.comparable and config is not None and page.a != page.b:
        # any two checkpoints: the pipeline's own test of the pair (scoring.compared), as for a parent
        tested, _ = compared(s, config, page.b, page.a)
        tested = tested[tested.status != NOT_COMPARABLE] if len(tested) else tested
        page.tested_stored = False
    if len(tested):
        page.tested = [
            {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
            for row in tested.sort_values("score").to_dict("records")
        ]


def _paired(pairs: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xa = pairs.column(f"a_{name}").to_numpy(zero_copy_only=False).astype(float)
    xb = pairs.column(f"b_{name}").to_numpy(zero_copy_only=False).astype(float)
    return xa, xb, xb - xa


def _change(name: str, xa: np.ndarray, xb: np.ndarray, d: np.ndarray, lower: bool) -> Row:
    """One score's paired change: the means over the pairs with both scores, the mean change and its t-interval,
    the shares better and worse."""
    ok = ~np.isnan(d)
    dd = d[ok]
    cnt = len(dd)
    delta = float(dd.mean()) if cnt else None
    half = _t975(cnt - 1) * float(dd.std(ddof=1)) / math.sqrt(cnt) if cnt > 1 else None
    better, worse = (dd < 0, dd > 0) if lower else (dd > 0, dd < 0)
    return dict(
        score=name,
        n_pairs=cnt,
        mean_a=float(xa[ok].mean()) if cnt else None,
        mean_b=float(xb[ok].mean()) if cnt else None,
        delta=delta,
        ci_low=None if half is None or delta is None else delta - half,
        ci_high=None if half is None or delta is None else delta + half,
        share_better=float(better.mean()) if cnt else None,
        share_worse=float(worse.mean()) if cnt else None,
        lower_is_better=lower,
        significant=half is not None and delta is not None and (delta - half > 0 or delta + half < 0),
    )


def _moved(
    pairs: pa.Table, xa: np.ndarray, xb: np.ndarray, d: np.ndarray, lower: bool, direction: str, limit: int
) -> list[Row]:
    """The ``limit`` samples whose change is largest in ``direction`` (largest first, then by id)."""
    with np.errstate(invalid="ignore"):
        keep = (
            ~np.isnan(d)
            & {
                "moved": d != 0,
                "better": d < 0 if lower else d > 0,
                "worse": d > 0 if lower else d < 0,
            }[direction]
        )
    idx = np.flatnonzero(keep)
    size = np.abs(d[idx])
    if len(idx) > limit:  # the changes at least as large as the limit-th largest (ties kept), then ordered exactly
        bar = -np.partition(-size, limit - 1)[limit - 1]
        idx, size = idx[size >= bar], size[size >= bar]
    ids = pairs.column("sample_id").take(pa.array(idx, pa.int64())).to_pylist()
    order = sorted(range(len(idx)), key=lambda k: (-size[k], ids[k]))[:limit]
    return [
        dict(sample_id=ids[k], score_a=float(xa[idx[k]]), score_b=float(xb[idx[k]]), delta=float(d[idx[k]]))
        for k in order
    ]


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
