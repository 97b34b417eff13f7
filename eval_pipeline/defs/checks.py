"""Every gate of a rubric as a Dagster asset check, in one step per checkpoint (a step per gate would pay Dagster's
per-step cost for each). A gate kind may show its check on another asset (judge reliability: beside judge_scores)."""

from collections.abc import Iterator

import dagster as dg
import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.types import Row
from eval_pipeline.defs.asset import asset_key, partition_rows
from eval_pipeline.defs.automation import RECHECK
from eval_pipeline.defs.partitions import CHECKPOINTS
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.scoring.gates import gate_kind, typed
from eval_pipeline.scoring.verdict import missing_judge_scores


def _check_specs(rubric: RubricConfig, assets: set[str]) -> tuple[list[dg.AssetCheckSpec], dict[str, dg.AssetKey]]:
    gates_key = asset_key(rubric, Table.GATES)
    specs, targets = [], {}
    for g in rubric.gates:
        kind = gate_kind(g.kind)
        shown_on = kind.check_target if kind.check_target in assets else None
        target = asset_key(rubric, shown_on) if shown_on else gates_key
        parts = kind.parts(typed(g), rubric) if kind.parts and shown_on else []
        for name in [g.name, *parts]:
            targets[name] = target
            specs.append(
                dg.AssetCheckSpec(
                    name,
                    asset=target,
                    partitions_def=CHECKPOINTS,
                    additional_deps=[gates_key] if target != gates_key else None,
                    description=g.description or f"{g.kind} {g.threshold:g}",
                    metadata={"kind": g.kind, "threshold": g.threshold, "min_samples": g.min_samples},
                    automation_condition=RECHECK,  # checked again with the gates (defs/automation.py)
                )
            )
    return specs, targets


def _result(name: str, target: dg.AssetKey, row: Row | None) -> dg.AssetCheckResult:
    if row is None:
        return dg.AssetCheckResult(
            check_name=name,
            asset_key=target,
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"reason": "fails closed: gate not evaluated for this checkpoint"},
        )
    value = None if pd.isna(row["value"]) else float(row["value"])
    pending = row.get("status") == "pending"  # not enough data yet: a warning, not a failure of the model
    return dg.AssetCheckResult(
        check_name=name,
        asset_key=target,
        passed=bool(row["passed"]),
        severity=dg.AssetCheckSeverity.WARN if pending else dg.AssetCheckSeverity.ERROR,
        metadata={  # numbers that change with the data (the Plots tab draws them); the threshold is text
            "value": dg.MetadataValue.float(round(value, 4)) if value is not None else dg.MetadataValue.text("n/a"),
            "margin": dg.MetadataValue.float(round(value - float(row["threshold"]), 4))
            if value is not None
            else dg.MetadataValue.text("n/a"),
            "threshold": dg.MetadataValue.text(f"{float(row['threshold']):g}"),
            "samples": dg.MetadataValue.text(str(int(row["n"]))),
            "status": dg.MetadataValue.text(str(row.get("status") or ("passed" if row["passed"] else "failed"))),
            "reason": dg.MetadataValue.text(str(row["reason"])),
        },
        description=str(row["reason"]),
    )


def gate_checks(rubric: RubricConfig, assets: set[str]) -> dg.AssetChecksDefinition:
    specs, targets = _check_specs(rubric, assets)

    @dg.multi_asset_check(specs=specs, name=f"{rubric.name}__gate_checks", can_subset=True)
    def checks(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> Iterator[dg.AssetCheckResult]:
        wh = warehouse.get()
        with wh.hold():
            rows = partition_rows(wh, rubric, Table.GATES, context.partition_key)
        by_gate = {} if rows is None else {r["gate"]: r for r in rows.to_dict("records")}  # none: all fail closed
        selected = {k.name for k in context.selected_asset_check_keys}
        for name, target in targets.items():
            if name in selected:
                yield _result(name, target, by_gate.get(name))

    return checks


def judge_completeness_check(rubric: RubricConfig) -> dg.AssetChecksDefinition:
    limit = rubric.completeness.max_missing_judge_scores

    @dg.asset_check(
        asset=asset_key(rubric, Table.JUDGE_SCORES),
        name="judge_completeness",
        partitions_def=CHECKPOINTS,
        description=f"At most {limit:.0%} of the panel's scores missing (completeness.max_missing_judge_scores): "
        "a dead endpoint or a judge that answers garbage turns this red, with the reasons.",
    )
    def judge_completeness(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
        wh = warehouse.get()
        with wh.hold():
            missing, total, reasons = missing_judge_scores(wh, rubric, context.partition_key)
        share = missing / total if total else 1.0
        passed = total > 0 and share <= limit
        reason = (
            "no judge scores for this checkpoint (fails closed)"
            if not total
            else f"{missing} of {total} judge scores missing ({share:.1%}, at most {limit:.0%})"
            + (f"; most often: {next(iter(reasons))}" if reasons else "")
        )
        return dg.AssetCheckResult(
            passed=passed,
            severity=dg.AssetCheckSeverity.ERROR,
            description=reason,
            metadata={
                "share_missing": dg.MetadataValue.float(round(share, 4)),
                "missing": dg.MetadataValue.int(missing),
                "scores": dg.MetadataValue.int(total),
                "max_share_missing": dg.MetadataValue.float(limit),
                "missing_reasons": dg.MetadataValue.json(reasons),
            },
        )

    return judge_completeness
