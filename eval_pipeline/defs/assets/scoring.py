"""Scoring: per-sample scores, per-checkpoint summaries, the comparison against the parent, and the gates."""

import base64
from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg
import pandas as pd

from eval_pipeline.agreement.trust import judge_bar
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import GATE_COLUMNS, PANEL, Table
from eval_pipeline.core.types import Row
from eval_pipeline.defs.asset import (
    asset_key,
    decision_asset,
    in_range,
    partition_rows,
    required_rows,
    rounded,
    rubric_asset,
    run_checkpoints,
    viewer_link,
)
from eval_pipeline.defs.assets.decisions import Inputs, Prefetched, commit_rows, commit_table, decided_metadata
from eval_pipeline.defs.assets.pools import across
from eval_pipeline.defs.queries import headline_trend
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.ingest.samples import load_samples
from eval_pipeline.publish.charts import trend_svg
from eval_pipeline.scoring.compared import compared, not_trusted
from eval_pipeline.scoring.gates import GateInputs, gate_frame, gate_kind, gate_rows, other_checkpoints
from eval_pipeline.scoring.scores import compute_scores
from eval_pipeline.scoring.summary import headline, summarise
from eval_pipeline.storage.views import refresh_views
from eval_pipeline.storage.warehouse import Reader, Warehouse

# what the wide scores table takes of the panel's judge_scores rows (not every judge's rationale)
PANEL_COLUMNS = ("sample_id", "judge", "judge_kind", "model", "dimension", "kind", "score", "status", "reason")


def scores_asset(rubric: RubricConfig, has_judge: bool, has_metrics: bool) -> dg.AssetsDefinition:
    deps = [asset_key(rubric, Table.SAMPLES)]
    if has_judge:
        deps.append(asset_key(rubric, Table.JUDGE_SCORES))
    if has_metrics:
        deps.append(asset_key(rubric, Table.METRICS))

    @rubric_asset(
        rubric,
        Table.SCORES,
        deps=deps,
        kinds={"duckdb"},
        description="One row per sample: the judge panel's dimension scores, metrics, adjustments (with the judge's "
        "original score and the reason) and the derived scores the rubric declares.",
    )
    def scores(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        samples = load_samples(wh, rubric, ckpt_id)
        judge = None
        if has_judge:  # the panel's rows and the columns the wide table takes (not every judge's rationale)
            panel = required_rows(
                wh, rubric, Table.JUDGE_SCORES, ckpt_id, columns=PANEL_COLUMNS, equal={"judge": PANEL}
            )
            judge = panel[panel.kind != "questionnaire_item"].reset_index(drop=True)
        mets = required_rows(wh, rubric, Table.METRICS, ckpt_id) if has_metrics else None
        if mets is not None:
            mets = mets.drop(columns=["checkpoint_id", "rubric_version"])
        df = compute_scores(rubric, ckpt_id, samples, judge, mets)
        wh.replace_partition(rubric.name, Table.SCORES, df, {"checkpoint_id": ckpt_id})
        head = (
            pd.to_numeric(df[rubric.headline], errors="coerce")
            if rubric.headline in df.columns
            else pd.Series(dtype=float)
        )
        return dg.MaterializeResult(
            metadata={
                "samples": dg.MetadataValue.int(len(df)),
                "headline": dg.MetadataValue.text(rubric.headline),
                "headline_mean": rounded(float(head.mean()) if head.notna().any() else None),
                "viewer": viewer_link(rubric, ckpt_id, "samples"),
                "samples_with_missing_scores": dg.MetadataValue.int(int((df["missing_dimensions"] > 0).sum())),
                "adjusted_samples": dg.MetadataValue.int(int(df["adjusted"].sum())),
            }
        )

    return scores


def _trend_markdown(wh: Warehouse, rubric: RubricConfig) -> str:
    """The headline across checkpoints with 95 % CIs, as an inline SVG image for the UI."""
    df = headline_trend(wh, rubric.name, rubric.headline)
    svg = trend_svg(df, f"{rubric.headline} by checkpoint (95 % CI)")
    if not svg:
        return "(no data yet)"
    data = base64.b64encode(svg.encode()).decode()
    return f"![{rubric.headline} trend](data:image/svg+xml;base64,{data})"


def _overall_markdown(overall: pd.DataFrame) -> str:
    rows = ["| score | n | mean | 95 % CI |", "|---|---:|---:|---|"]
    for r in overall.itertuples():
        ci = f"[{r.ci_low:.3f}, {r.ci_high:.3f}]" if r.ci_low == r.ci_low else "–"
        mean = f"{r.mean:.3f}" if r.mean == r.mean else "–"
        rows.append(f"| {r.score} | {r.n} | {mean} | {ci} |")
    return "\n".join(rows)


def summary_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @rubric_asset(
        rubric,
        Table.SUMMARY,
        deps=[asset_key(rubric, Table.SCORES)],
        kinds={"duckdb"},
        description="Per checkpoint and score: n, mean, standard deviation, seeded 95 % bootstrap CI and pass rate; "
        "overall and by " + (", ".join(" x ".join(b) for b in rubric.breakdowns) or "no breakdown") + ".",
    )
    def summary(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        df = summarise(rubric, ckpt_id, required_rows(wh, rubric, Table.SCORES, ckpt_id))
        wh.replace_partition(rubric.name, Table.SUMMARY, df, {"checkpoint_id": ckpt_id})
        refresh_views(wh)
        overall = df[df.breakdown == "all"]
        hl = headline(rubric, df)
        metadata: dict[str, dg.MetadataValue] = {
            "headline_mean": rounded(hl),
            "headline": dg.MetadataValue.text(rubric.headline),
            "viewer": viewer_link(rubric, ckpt_id),
        }
        # each score's mean as its own number, so the Plots tab draws it across checkpoints
        for r in overall.itertuples():
            metadata[f"mean_{r.score}"] = rounded(r.mean)
        metadata["overall"] = dg.MetadataValue.md(_overall_markdown(overall))
        if not in_range(context):  # a chart over every checkpoint: one a run, not one a checkpoint of a range
            metadata["trend_chart"] = dg.MetadataValue.md(_trend_markdown(wh, rubric))
        return dg.MaterializeResult(metadata=metadata)

    return summary


def _untrusted_sets(wh: Warehouse, rubric: RubricConfig) -> dict[str, tuple[str, ...]]:
    """Every checkpoint's ``untrusted_dimensions``, from one read of judge_trust (what of trust a comparison
    reads)."""
    if not wh.table_exists(rubric.name, Table.JUDGE_TRUST):
        return {}
    rows = wh.read(rubric.name, Table.JUDGE_TRUST, columns=("checkpoint_id", "dimension", "verdict", "n_rated"))
    floor = judge_bar(rubric).min_samples
    out: dict[str, set[str]] = {}
    for r in rows.itertuples():
        if not_trusted(str(r.verdict), int(r.n_rated), floor):
            out.setdefault(str(r.checkpoint_id), set()).add(str(r.dimension))
    return {c: tuple(sorted(v)) for c, v in out.items()}


COMPARED = (Table.SCORES, Table.HUMAN_RATINGS, Table.JUDGE_SCORES, Table.JUDGE_IDENTITY, Table.JUDGE_REPEATABILITY)


def comparison_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    judged = bool(rubric.judged_dimensions or rubric.questionnaire)
    repeats = bool(rubric.repeat and judged)
    deps: list[dg.AssetKey | dg.AssetDep] = [*across(rubric, Table.SCORES)]
    deps += across(rubric, Table.JUDGE_REPEATABILITY) if repeats else []
    deps += [*across(rubric, Table.HUMAN_RATINGS), asset_key(rubric, Table.AGREEMENT)] if judged else []
    deps.append(asset_key(rubric, Table.CHECKPOINT_LINEAGE))

    @decision_asset(
        rubric,
        Table.COMPARISON,
        deps,
    )
    def comparison(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        """Each checkpoint against its parent (or the previous one): per-score change with a seeded paired bootstrap 95
        % CI over the samples both share, shares better and worse, a paired t-test corrected over the rubric's scores
        (Holm) and the minimum detectable effect; a significant drop is a regression. Checkpoints judged by different
        judges are never compared (not_comparable, with the command that re-judges the parent). A checkpoint is decided
        again only when its rows or its parent's changed, or the dimensions its judge is not trusted on did."""
        wh = warehouse.get()
        d = Inputs(wh, rubric)
        ckpts = [c for c in d.checkpoints if d.has(Table.SCORES, c)]
        untrusted = _untrusted_sets(wh, rubric)
        fp = {
            c: d.fingerprint(d.own(c, *COMPARED), d.parent(c), d.own(d.parent(c), *COMPARED), untrusted.get(c, ()))
            for c in ckpts
        }
        todo = d.todo(Table.COMPARISON, fp)
        if not todo:
            return dg.MaterializeResult(metadata=decided_metadata(len(ckpts), []))
        reader = Prefetched(wh, d.with_parents(todo))
        frames, notes = {}, {}
        for c in todo:
            frames[c], notes[c] = compared(reader, rubric, c, d.parent(c))
        commit_table(wh, rubric, Table.COMPARISON, fp, frames)
        regressed = {c: sorted(f.score[f.regression]) for c, f in frames.items() if len(f) and f.regression.any()}
        metadata: dict[str, dg.MetadataValue] = {
            "note": dg.MetadataValue.text(f"{todo[-1]}: {notes[todo[-1]]}"),
            "regressions": dg.MetadataValue.int(sum(len(s) for s in regressed.values())),
            # each decided checkpoint that regressed, with its scores (the deltas are in the table)
            "regressed": dg.MetadataValue.json(regressed),
        }
        return dg.MaterializeResult(metadata=decided_metadata(len(ckpts), todo, **metadata))

    return comparison


def gate_tables(rubric: RubricConfig) -> list[str]:
    """The tables the rubric's gate kinds read (the gates asset depends on them)."""
    return sorted({t for g in rubric.gates for t in gate_kind(g.kind).needs})


def _loader(reader: Reader, rubric: RubricConfig, ckpt: str) -> Callable[[str], pd.DataFrame | None]:
    return lambda table: partition_rows(reader, rubric, table, ckpt)


def _outcome(rows: Sequence[Row]) -> dict[str, tuple[bool, object]]:
    """Each gate's outcome (passed, status) in a checkpoint's gate rows."""
    out = {}
    for r in rows:
        status = r.get("status")
        out[str(r["gate"])] = (bool(r["passed"]), None if status is None or status != status else status)
    return out


def _flipped(old: Sequence[Row], new: Sequence[Row]) -> set[str]:
    """The gates whose outcome (passed, status) differs between two decisions of one checkpoint (or is new)."""
    was, now = _outcome(old), _outcome(new)
    return {g for g, o in now.items() if was.get(g) != o}


# the decisions the gates (and the verdict) read, decided before them in the same run
DECIDED = (Table.AGREEMENT, Table.JUDGE_TRUST, Table.COMPARISON, Table.LENGTH_BIAS)
OWN_DECIDED = tuple(t for t in DECIDED if t != Table.JUDGE_TRUST)


def _with_trust_gates(old: Sequence[Row], new: Sequence[Row]) -> list[Row] | None:
    """A checkpoint's stored gate rows with those of the gates that read the judge's trust (``new``) put in their
    places; None when they do not match row for row (the gates are then all evaluated again)."""
    names = [str(r["gate"]) for r in old]
    fresh = {str(r["gate"]): r for r in new}
    if not new or len(fresh) != len(new) or not set(fresh) <= set(names) or len(set(names)) != len(names):
        return None
    return [fresh.get(name, {c: r.get(c) for c in GATE_COLUMNS}) for name, r in zip(names, old)]


GateEvaluations = Callable[[str, pd.DataFrame, Any], list[dg.AssetCheckEvaluation]]


def gates_asset(rubric: RubricConfig, upstream: list[dg.AssetKey], checks: GateEvaluations) -> dg.AssetsDefinition:
    decided_from = [k.path[-1] for k in upstream]
    deps: list[dg.AssetKey | dg.AssetDep] = [*across(rubric, Table.SCORES), asset_key(rubric, Table.CHECKPOINT_LINEAGE)]
    deps += [asset_key(rubric, t) if t in DECIDED else across(rubric, t)[0] for t in decided_from]

    @decision_asset(
        rubric,
        Table.GATES,
        deps,
        gates=", ".join(g.name for g in rubric.gates),
    )
    def gates(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        """Threshold gates from the rubric YAML ({gates}) for every checkpoint; each is also an asset check, reported
        per checkpoint when its result changes. Too little data fails closed. A checkpoint is decided again only when
        what its gates read changed."""
        wh = warehouse.get()
        d = Inputs(wh, rubric)
        ckpts = [c for c in d.checkpoints if d.has(Table.SCORES, c)]
        # what a checkpoint's gates read, in two parts: the judge's trust (which moves with every rating of any
        # checkpoint that judge judged) apart from the rest
        # a pinned baseline's rows (gates.other_checkpoints) are part of what every checkpoint's gates read
        pinned = tuple((b, d.everything(b)) for b in other_checkpoints(rubric))
        rest = {c: d.fingerprint(d.everything(c), d.parent(c), d.decisions(c, *OWN_DECIDED), pinned) for c in ckpts}
        fp = {c: d.in_two(rest[c], d.fingerprint(d.decisions(c, Table.JUDGE_TRUST))) for c in ckpts}
        todo = d.todo(Table.GATES, fp)
        if not todo:
            return dg.MaterializeResult(metadata=decided_metadata(len(ckpts), []))
        reader = Prefetched(wh, todo)
        stored: dict[str, list[Row]] = {}
        if reader.table_exists(rubric.name, Table.GATES):  # records: a checkpoint's handful of rows, as plain rows
            for r in reader.read(rubric.name, Table.GATES, where={"checkpoint_id": tuple(todo)}).to_dict("records"):
                stored.setdefault(str(r["checkpoint_id"]), []).append(r)
        rows: dict[str, list[Row]] = {}
        for c in todo:
            scores = reader.read(rubric.name, Table.SCORES, where={"checkpoint_id": c})
            inputs = GateInputs(
                load=_loader(reader, rubric, c),
                parent=d.parent(c),
                lineage_known=True,
                checkpoint=c,
                load_of=lambda table, other: partition_rows(reader, rubric, table, other),
            )
            kept = None
            if c in stored and d.first_unchanged(Table.GATES, c, rest[c]):  # only the trust moved: its gates
                kept = _with_trust_gates(stored[c], gate_rows(rubric, c, scores, inputs, reading=Table.AGREEMENT))
            rows[c] = kept if kept is not None else gate_rows(rubric, c, scores, inputs)
        commit_rows(wh, rubric, Table.GATES, fp, todo, gate_frame([r for c in todo for r in rows[c]]))
        refresh_views(wh)
        mine = set(run_checkpoints(context))
        for c in todo:  # each checkpoint's checks: all, for the run's own; for another, those whose outcome changed
            flipped = _flipped(stored[c], rows[c]) if c not in mine and c in stored else None
            if flipped is not None and not flipped:
                continue  # nothing to report of it
            for evaluation in checks(c, gate_frame(rows[c]), reader):
                if flipped is None or evaluation.check_name in flipped:
                    context.log_event(evaluation)
        last = rows[todo[-1]]
        metadata = {
            "passed": dg.MetadataValue.int(sum(bool(r["passed"]) for r in last)),
            "total": dg.MetadataValue.int(len(last)),
            "failed_gates": dg.MetadataValue.json({r["gate"]: r["reason"] for r in last if not r["passed"]}),
        }
        return dg.MaterializeResult(metadata=decided_metadata(len(ckpts), todo, **metadata))

    return gates
