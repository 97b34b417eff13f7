"""A static HTML report: one file, opens offline, no CDN; charts are inline SVG.

Per rubric: the headline's distribution per checkpoint, checkpoint trends per score with 95 % CIs,
gate status, regressions against the parent, and judge-human / human-human agreement.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from eval_pipeline.core.contracts import Table
from eval_pipeline.publish.charts import esc, histogram_svg, trend_svg
from eval_pipeline.publish.overview import TONE, Overview, overview
from eval_pipeline.publish.queries import leaderboard_rows
from eval_pipeline.publish.viewer.render import change_class, num, signed
from eval_pipeline.storage.tables import Filter
from eval_pipeline.storage.warehouse import Warehouse


def _table(df: pd.DataFrame, status_col: str | None = None) -> str:
    if df.empty:
        return "<p class='muted'>(none)</p>"
    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    rows = []
    for r in df.itertuples(index=False):
        cells = []
        for c, v in zip(df.columns, r):
            cls = ""
            if c == status_col:
                cls = " class='pass'" if v in (True, "PASS") else " class='fail'"
                v = "PASS" if v in (True, "PASS") else "FAIL"
            elif isinstance(v, float):
                v = "" if v != v else f"{v:.3f}"
            cells.append(f"<td{cls}>{esc(v)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def scale_groups(dims: pd.DataFrame) -> dict[float, list[str]]:
    """Scores grouped so one chart has one scale: by the power of ten their values reach (nvcs about 0.4 on a
    chart up to 1, ratings 1-5 up to 10, immersivity 0-100 up to 100, totals up to 1000)."""
    groups: dict[float, list[str]] = {}
    for name in dict.fromkeys(dims.score):
        vals = dims[dims.score == name][["mean", "ci_low", "ci_high"]].to_numpy(dtype=float)
        top = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0
        magnitude = float(10 ** max(0, int(np.ceil(np.log10(top))) if top > 0 else 0))
        groups.setdefault(magnitude, []).append(name)
    return dict(sorted(groups.items()))


def _by_checkpoint(
    wh: Warehouse,
    rubric: str,
    table: str,
    columns: tuple[str, ...],
    where: dict[str, Filter] | None = None,
    order_by: tuple[str, ...] = (),
    rank: dict[str, int] | None = None,
) -> pd.DataFrame:
    """``columns`` of the rubric's ``table`` after its checkpoint (named ``checkpoint``, as the report shows it);
    with ``rank`` (checkpoint -> its place), in the checkpoints' order, then by ``order_by``."""
    df = wh.read(rubric, table, columns=("checkpoint_id", *columns), where=where, order_by=() if rank else order_by)
    df = df.rename(columns={"checkpoint_id": "checkpoint"})
    if rank is None:
        return df
    ordered = df.assign(_o=df.checkpoint.map(rank)).sort_values(["_o", *order_by], kind="stable")
    return ordered.drop(columns="_o")


def _per_checkpoint(
    wh: Warehouse,
    rubric: str,
    table: str,
    heading: str,
    columns: tuple[str, ...],
    order_by: tuple[str, ...],
    rank: dict[str, int],
    status_col: str | None = None,
) -> list[str]:
    """The section of a table's ``columns`` in the checkpoints' order, then ``order_by``; nothing before the table
    exists."""
    if not wh.table_exists(rubric, table):
        return []
    rows = _by_checkpoint(wh, rubric, table, columns, order_by=order_by, rank=rank)
    return [f"<h3>{heading}</h3>" + _table(rows, status_col)]


def _true(column: pd.Series) -> pd.Series:
    """A boolean column with no value read as false (SQL's ``WHERE column``)."""
    return column.astype("boolean").fillna(False).astype(bool)


def _charts(wh: Warehouse, rubric: str, summ: pd.DataFrame, headline: str | None, rank: dict[str, int]) -> list[str]:
    """The rubric's charts: the headline's distribution per checkpoint and its trend, then every other score's trend
    (grouped by scale, five to a chart)."""
    out: list[str] = []
    if headline:
        scores = wh.read(rubric, Table.SCORES, columns=("checkpoint_id", headline)).set_axis(
            ["checkpoint_id", "v"], axis=1
        )
        vals = {
            c: pd.to_numeric(g.v, errors="coerce").dropna().to_numpy(float)
            for c, g in sorted(scores.groupby("checkpoint_id"), key=lambda kv: rank.get(kv[0], 0))
        }
        out.append("<div class='charts'>" + histogram_svg(vals, f"{headline}: distribution per checkpoint"))
        hl = summ[summ.score == headline].rename(columns={"checkpoint_id": "checkpoint"})
        out.append(
            trend_svg(hl[["checkpoint", "score", "mean", "ci_low", "ci_high"]], f"{headline}: trend (95 % CI)")
            + "</div>"
        )
    dims = summ[~summ.score.str.contains("=") & (summ.score != headline)].rename(
        columns={"checkpoint_id": "checkpoint"}
    )
    if len(dims):
        charts = []
        for magnitude, names in scale_groups(dims).items():
            chunks = [names[i : i + 5] for i in range(0, len(names), 5)]
            charts += [
                trend_svg(
                    dims[dims.score.isin(ch)][["checkpoint", "score", "mean", "ci_low", "ci_high"]],
                    f"scores up to {magnitude:g} by checkpoint (95 % CI)",
                )
                for ch in chunks
            ]
        out.append("<div class='charts'>" + "".join(charts) + "</div>")
    return out


def rubric_section(wh: Warehouse, rubric: str) -> str:
    order = wh.read(
        "main", "checkpoints", columns=("checkpoint_id", "created_at"), order_by=("created_at", "checkpoint_id")
    )
    rank = {c: i for i, c in enumerate(order.checkpoint_id)}
    summ = wh.read(rubric, Table.SUMMARY, where={"breakdown": "all"})
    summ = summ.assign(_o=summ.checkpoint_id.map(rank)).sort_values("_o")
    headline = summ[summ.headline.astype(str).str.lower() == "true"].score.iloc[0] if len(summ) else None
    out = [f"<section id='{esc(rubric)}'><h2>{esc(rubric)}</h2>", *_charts(wh, rubric, summ, headline, rank)]
    gates = ("gate", "passed", "value", "threshold", "reason")
    out += _per_checkpoint(wh, rubric, Table.GATES, "Gates", gates, ("gate",), rank, status_col="passed")
    if wh.table_exists(rubric, Table.COMPARISON):
        c = _by_checkpoint(
            wh,
            rubric,
            Table.COMPARISON,
            ("parent_id", "score", "n_pairs", "delta", "ci_low", "ci_high", "share_better", "share_worse")
            + ("regression", "guarded"),
        ).rename(columns={"parent_id": "parent"})
        c = c[_true(c.guarded) | _true(c.regression)].drop(columns="guarded")
        out.append("<h3>Guarded scores against the parent</h3>" + _table(c))
    repeats: tuple[str, ...] = (
        "dimension",
        "n_samples",
        "times",
        "score_source",
        "alpha_interval",
        "mean_within_sd",
        "share_changed",
    )
    repeats += ("alpha_chosen", "mean_within_sd_chosen", "share_changed_chosen", "missing")
    heading = (
        "Judge repeatability (a subset scored again; on the score that feeds the results, then on the score the "
        "judge wrote)"
    )
    out += _per_checkpoint(wh, rubric, Table.JUDGE_REPEATABILITY, heading, repeats, ("dimension",), rank)
    bias: tuple[str, ...] = (
        "score",
        "n",
        "judge_length_rho",
        "n_rated",
        "rated_judge_length_rho",
        "human_length_rho",
        "rho_gap",
    )
    bias += ("gap_ci_low", "gap_ci_high", "flagged", "mean", "length_controlled_mean")
    heading = (
        "Length bias (judge rho with length against the humans'; mean with the length effect taken out at the "
        "parent's mean length)"
    )
    out += _per_checkpoint(wh, rubric, Table.LENGTH_BIAS, heading, bias, ("score",), rank)
    if wh.table_exists(rubric, Table.AGREEMENT):
        a = _by_checkpoint(
            wh,
            rubric,
            Table.AGREEMENT,
            ("dimension", "raters", "n_items", "value", "ci_low", "ci_high", "prevalence", "ceiling_share", "label"),
            where={"statistic": "cohen_kappa_quadratic", "checkpoint_id": "ALL"},
            order_by=("raters", "dimension"),
        ).rename(columns={"value": "kappa_quadratic"})
        out.append(
            "<h3>Agreement, all checkpoints (quadratic kappa; prevalence and ceiling share beside it)</h3>" + _table(a)
        )
    out.append("</section>")
    return "".join(out)


CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}th{background:#f5f5f5}
.pass{background:#e3f4e1}
.fail{background:#fbe3e3}.good{color:#1b7f3b;font-weight:600}.bad{color:#b3261e;font-weight:600}
.tag{display:inline-block;padding:0 .45em;border-radius:.7em;font-size:.85em;background:#e6e8ef}
.tag.bad{background:#fbe2df}.tag.good{background:#dff3e4}.tag.warn{background:#fdefc8}.tag.incomplete{background:#3a3f4b;color:#fff}
td.v-bad{background:#fdf0ee}td.v-good{background:#f0faf3}td.v-warn{background:#fff8e6}td.v-incomplete{background:#ececf0}
.verdict{text-transform:uppercase;font-size:.85em}.charts{display:flex;flex-wrap:wrap;gap:12px}.muted{color:#888}section{margin-bottom:36px}"""


def _num(v: float | None) -> str:
    """A number as the viewer shows it (publish.viewer.render.num): the report and the viewer round alike."""
    return num(v)


def overview_html(ov: Overview) -> str:
    """The report's first screen: the stored verdicts (the console's), what regressed, the judge's trust."""
    if not ov.checkpoints:
        return "<p class='muted'>No verdicts yet.</p>"
    head = "".join(f"<th>{esc(r)}</th>" for r in ov.rubrics)
    rows = []
    for c in ov.checkpoints:
        ck = c["checkpoint_id"]
        best = " <span class='tag good'>best</span>" if ck == ov.best_overall else ""
        cells = [f"<td>{esc(ck)}{best}</td><td><span class='tag {TONE[c['verdict']]}'>{esc(c['verdict'])}</span></td>"]
        for r in ov.rubrics:
            v = ov.cell(ck, r)
            if v is None:
                cells.append("<td class='muted'>–</td>")
                continue
            if v.verdict == "incomplete":
                shown = "<span class='muted'>no result (incomplete data)</span>"
            else:
                change = ""
                if v.headline_delta is not None:
                    cls = change_class(v.headline_delta, v.headline_change)  # as the viewer colours and rounds it
                    way = " (lower is better)" if v.headline_lower_is_better else ""
                    shown_delta = esc(signed(v.headline_delta))
                    change = f" <span class='{cls}' title='{esc(v.headline_change + way)}'>{shown_delta}</span>"
                rank = ov.ranks.get((ck, r))
                ranked = f" <small class='rank' title='rank set (95 %)'>rank {esc(rank)}</small>" if rank else ""
                shown = f"{_num(v.headline)}{change}{ranked}"
            cells.append(
                f"<td class='v-{TONE[v.verdict]}' data-rubric='{esc(r)}'><b class='verdict'>{esc(v.verdict)}</b>"
                f"<br>{shown}<br><small class='muted'>judge {esc(v.trust)}</small></td>"
            )
        rows.append(f"<tr class='verdict-row' data-checkpoint='{esc(ck)}'>{''.join(cells)}</tr>")
    matrix = f"<table class='verdicts'><tr><th>checkpoint</th><th>verdict</th>{head}</tr>{''.join(rows)}</table>"
    regressed = "".join(
        f"<li><span class='tag bad'>REGRESSED</span> <b>{esc(g['rubric'])}</b> · {esc(g['checkpoint'])}: "
        f"{esc(g['text'])}</li>"
        for g in ov.regressions
    )
    trust = "".join(
        f"<tr><td>{esc(v.rubric)}</td><td>{esc(v.judge or '–')}</td><td>{esc(v.trust)}</td><td>"
        + esc(
            "; ".join(
                x
                for x in (
                    f"untrusted on {', '.join(v.untrusted)}" if v.untrusted else "",
                    f"drifts on {v.checkpoint_id} on {', '.join(v.drifting)}" if v.drifting else "",
                    f"pending on {', '.join(v.trust_pending)}"
                    + (f": {v.ratings_to_settle}" if v.ratings_needed else "")
                    if v.trust_pending
                    else "",
                )
                if x
            )
        )
        + "</td></tr>"
        for v in ov.trust
    )
    return (
        "<section id='overview'><h2>Verdicts</h2><p class='muted'>One verdict per checkpoint and rubric, the one the "
        "console printed. A change is coloured only when it is significant, by the score's own direction.</p>"
        f"{matrix}<h2>What regressed</h2>"
        + (f"<ul>{regressed}</ul>" if regressed else "<p class='muted'>Nothing regressed.</p>")
        + "<h2>Can the judge be trusted?</h2><table><tr><th>rubric</th><th>judge</th><th>trust</th>"
        f"<th>what it rests on</th></tr>{trust}</table></section>"
    )


def build_report(wh: Warehouse) -> str:
    rubrics = sorted({schema for schema, _ in wh.tables(["summary"])} - {"main"})
    board = leaderboard_rows(wh) if rubrics else pd.DataFrame()
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nav = " · ".join(f"<a href='#{esc(r)}'>{esc(r)}</a>" for r in rubrics)
    body = "".join(rubric_section(wh, r) for r in rubrics)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>eval_pipeline "
        f"report</title><style>{CSS}</style></head>"
        f"<body><h1>eval_pipeline report</h1><p class='muted'>generated {stamp} from "
        f"{esc(Path(wh.describe()).name)}</p>"
        f"<p>{nav}</p>{overview_html(overview(wh))}<h2>Leaderboard</h2>{_table(board)}{body}</body></html>"
    )


def write_report(wh: Warehouse, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    with wh.session() as reader:  # drawn first: a report that cannot be drawn leaves no folder behind
        text = build_report(reader)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.html"
    tmp = out / ".report.html.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)  # atomic: a reader never sees half a report
    return path


def redraw_report(wh: Warehouse, out_dir: str | Path) -> tuple[Path | None, str | None]:
    """Write the report once a run has ended, never failing the run: (its path, None), or (None, the reason in
    one line). Drawn once per run, not per step: the report covers every rubric and checkpoint."""
    try:
        return write_report(wh, out_dir), None
    except Exception as exc:  # noqa: BLE001 - a report that cannot be drawn is said, never fatal
        return None, f"{type(exc).__name__}: {exc}"[:500]
