"""The samples table: filtered, sorted and paged in SQL (only the page shown is read)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.ids import check_identifier
from eval_pipeline.core.types import Row
from eval_pipeline.publish.viewer.queries.common import (
    columns,
    id_column,
    records,
    score_names,
    tables,
)
from eval_pipeline.scoring.comparison import parent_of
from eval_pipeline.storage.warehouse import Warehouse

PAGE_SIZE = 50
FILTERS = ("all", "regressed", "improved", "disagree", "missing")


@dataclass
class SampleQuery:
    """The samples table's filters, from the URL's query string."""

    score: str | None = None  # the score that ranges, sorting by change and regressions refer to
    lo: float | None = None
    hi: float | None = None
    filter: str = "all"
    q: str = ""
    sort: str | None = None  # a score name, "delta", or "sample_id"
    order: str = "asc"
    page: int = 1
    disagree_at: float | None = None  # |judge - human mean| at least this


@dataclass
class SamplesPage:
    rubric: str
    checkpoint: str
    parent: str | None
    query: SampleQuery
    score_names: list[str]
    rated_dimensions: list[str]
    rows: list[Row]
    total: int
    pages: int
    shown_scores: list[str] = field(default_factory=list)


def samples_page(
    wh: Warehouse, rubric: RubricConfig | None, rubric_name: str, ckpt: str, sq: SampleQuery
) -> SamplesPage:
    check_identifier(rubric_name, "rubric name")
    with wh.session() as s:
        present = tables(s, rubric_name)
        if "scores" not in present:
            return SamplesPage(rubric_name, ckpt, None, sq, [], [], [], 0, 0)
        names = score_names(s, rubric_name, ckpt, rubric, present)
        cols = {c for c, _ in columns(s, rubric_name, Table.SCORES)}
        names = [n for n in names if n in cols]
        if not names:  # no such checkpoint (or no scores of it): an empty page, never SQL with no columns
            return SamplesPage(rubric_name, ckpt, None, sq, [], [], [], 0, 0)
        for n in names:
            check_identifier(n, "score name")
        parent = parent_of(s, ckpt)  # the parent the comparison used
        score = sq.score if sq.score in names else _default_score(rubric, names)
        sq.score = score
        rated = []
        if "human_ratings" in present:
            rated = [
                r[0]
                for r in s.query_rows(
                    f'SELECT DISTINCT dimension FROM "{rubric_name}".human_ratings WHERE checkpoint_id = ? ORDER BY 1',
                    [ckpt],
                )
                if r[0] in names
            ]
        sql, params = _samples_sql(rubric, rubric_name, ckpt, parent, names, rated, sq, present, s, cols)
        total = int(s.query_rows(f"SELECT count(*) FROM ({sql})", params)[0][0])
        order = _order_by(sq, names)
        pages = max(1, math.ceil(total / PAGE_SIZE))
        page = min(max(1, sq.page), pages)
        sq.page = page
        rows = s.query_df(
            f"SELECT * FROM ({sql}) ORDER BY {order} LIMIT {PAGE_SIZE} OFFSET {(page - 1) * PAGE_SIZE}", params
        )
    shown = _shown_scores(rubric, names)
    return SamplesPage(rubric_name, ckpt, parent, sq, names, rated, records(rows), total, pages, shown)


def _default_score(rubric: RubricConfig | None, names: list[str]) -> str | None:
    if rubric is not None:
        for g in rubric.guarded_dimensions:
            if g in names:
                return g
        if rubric.headline in names:
            return rubric.headline
    return names[0] if names else None


def _shown_scores(rubric: RubricConfig | None, names: list[str]) -> list[str]:
    """The columns of the samples table: the judged dimensions and the headline (the rest is on the sample page)."""
    if rubric is None:
        return names[:8]
    keys = [d.key for d in rubric.dimensions if d.key in names]
    extra = [n for n in [rubric.headline, *rubric.guarded_dimensions] if n in names and n not in keys]
    return (keys + extra)[:10] or names[:8]


def _lower_is_better(rubric: RubricConfig | None, score: str | None) -> bool:
    return bool(rubric and score in rubric.lower_is_better)


def _samples_sql(
    rubric: RubricConfig | None,
    name: str,
    ckpt: str,
    parent: str | None,
    names: list[str],
    rated: list[str],
    sq: SampleQuery,
    present: set[str],
    wh: Warehouse,
    score_cols: set[str],
) -> tuple[str, list[object]]:
    score = sq.score
    sel = ", ".join(f's."{n}"' for n in names)
    params: list[object] = []
    joins = ""
    extra = ""
    if score and parent:
        joins += f' LEFT JOIN "{name}".scores p ON p.sample_id = s.sample_id AND p.checkpoint_id = ?'
        params.append(parent)
        extra += f', p."{score}" AS parent_score, s."{score}" - p."{score}" AS delta'
    else:
        extra += ", NULL::DOUBLE AS parent_score, NULL::DOUBLE AS delta"
    join, column, more = _people_join(rubric, name, ckpt, score, rated, wh)
    joins, extra = joins + join, extra + column
    params += more
    response = rubric.inputs.response_field if rubric else "response"
    search = ""
    preview = ""
    if "samples" in present:
        text_cols = [
            c
            for c, t in columns(wh, name, "samples")
            if t == "VARCHAR" and c not in ("checkpoint_id", "rubric_version")
        ]
        for c in text_cols:
            check_identifier(c, "column name")
        sid = id_column(rubric)
        joins += f' LEFT JOIN "{name}".samples t ON t."{sid}" = s.sample_id AND t.checkpoint_id = s.checkpoint_id'
        if response in text_cols:
            preview = f', left(t."{response}", 160) AS preview'
        if sq.q and text_cols:
            search = " AND (" + " OR ".join(f't."{c}" ILIKE ?' for c in text_cols) + ")"
    if not preview:
        preview = ", NULL AS preview"
    missing = (
        ", s.missing_dimensions, s.missing_reasons"
        if "missing_dimensions" in score_cols
        else ", 0 AS missing_dimensions, NULL AS missing_reasons"
    )
    where = ["s.checkpoint_id = ?"]
    params.append(ckpt)
    if score and sq.lo is not None:
        where.append(f's."{score}" >= ?')
        params.append(sq.lo)
    if score and sq.hi is not None:
        where.append(f's."{score}" <= ?')
        params.append(sq.hi)
    worse = "delta > 0" if _lower_is_better(rubric, score) else "delta < 0"
    better = "delta < 0" if _lower_is_better(rubric, score) else "delta > 0"
    outer = []
    if sq.filter == "regressed":
        outer.append(worse)
    elif sq.filter == "improved":
        outer.append(better)
    elif sq.filter == "disagree":
        outer.append("disagreement >= ?")
    elif sq.filter == "missing":
        outer.append("missing_dimensions > 0")
    inner = (
        f'SELECT s.sample_id, {sel}{extra}{preview}{missing} FROM "{name}".scores s{joins} '
        f"WHERE {' AND '.join(where)}{search}"
    )
    if search:
        params.extend([f"%{sq.q}%"] * search.count("ILIKE"))
    sql = f"SELECT * FROM ({inner})" + (f" WHERE {' AND '.join(outer)}" if outer else "")
    if sq.filter == "disagree":
        params.append(sq.disagree_at if sq.disagree_at is not None else _disagree_default(rubric, score))
    return sql, params


def _people_join(
    rubric: RubricConfig | None, name: str, ckpt: str, score: str | None, rated: list[str], wh: Warehouse
) -> tuple[str, str, list[object]]:
    """The people's mean on ``score`` beside each sample (only people: imported model raters are shown, never
    averaged in), and how far the judge is from it: the join, the columns and the join's parameters."""
    if not rated:
        return "", ", NULL::DOUBLE AS human_mean, NULL::DOUBLE AS disagreement", []
    humans = ""
    if any(c == "rater_kind" for c, _ in columns(wh, name, "human_ratings")) and not (
        rubric and rubric.human_ratings.models_in_human_mean
    ):
        humans = " AND coalesce(rater_kind, 'human') = 'human'"
    join = (
        f' LEFT JOIN (SELECT sample_id, dimension, avg(score) AS hm FROM "{name}".human_ratings '
        f"WHERE checkpoint_id = ?{humans} GROUP BY ALL) h ON h.sample_id = s.sample_id"
    )
    if score in rated:
        column = f', h.hm AS human_mean, abs(s."{score}" - h.hm) AS disagreement'
        return join + " AND h.dimension = ?", column, [ckpt, score]
    return join + " AND FALSE", ", NULL::DOUBLE AS human_mean, NULL::DOUBLE AS disagreement", [ckpt]


def _disagree_default(rubric: RubricConfig | None, score: str | None) -> float:
    """A quarter of the score's scale (1 point on a 1-5 scale); 1 when the scale is unknown."""
    if rubric is not None and score is not None:
        scales = rubric.rating_scales
        if score in scales:
            sc = scales[score]
            return max(1.0, (sc.max - sc.min) / 4)
    return 1.0


def _order_by(sq: SampleQuery, names: list[str]) -> str:
    direction = "DESC" if sq.order == "desc" else "ASC"
    if sq.sort == "delta":
        key = "delta"
    elif sq.sort == "disagreement":
        key = "disagreement"
    elif sq.sort in names:
        key = f'"{sq.sort}"'
    else:
        key = "sample_id"
    return f"{key} {direction} NULLS LAST, sample_id"
