"""Every gate of a rubric as a Dagster asset check on each checkpoint. The gates are decided for every checkpoint at
once (the unpartitioned ``gates`` asset), so that step reports each checkpoint's checks as it decides them
(``gate_evaluations``: Dagster's AssetCheckEvaluation for the checkpoint's partition, where its results changed);
the checks themselves are shown on a partitioned asset of the checkpoint — ``summary``, or the asset a gate kind
names (judge reliability and repeatability: beside ``judge_scores``) — and, run from the UI, answer the same from
the stored gates (over several checkpoints at once, one evaluation each)."""

from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg
import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.types import Row
from eval_pipeline.defs.asset import asset_key, partition_rows, run_partitions
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
        target = asset_key(rubric, shown_on or Table.SUMMARY)
        parts = kind.parts(typed(g), rubric) if kind.parts and shown_on else []
        for name in [g.name, *parts]:
            targets[name] = target
            specs.append(
                dg.AssetCheckSpec(
                    name,
                    asset=target,
                    partitions_def=CHECKPOINTS,
                    additional_deps=[gates_key],
                    description=g.description or f"{g.kind} {g.threshold:g}",
                    metadata={"kind": g.kind, "threshold": g.threshold, "min_samples": g.min_samples},
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
        # Dagster's checks know passed and failed (a warning's failure is yellow): a pending gate says it is
        # pending first, in the words the UI shows
        description=("PENDING, not a failure: " if pending else "") + str(row["reason"]).removeprefix("pending: "),
    )


def _evaluation(result: dg.AssetCheckResult, partition: str) -> dg.AssetCheckEvaluation:
    """A check's result as the evaluation of one checkpoint's partition (reported by a step over several)."""
    assert result.asset_key is not None and result.check_name is not None
    return dg.AssetCheckEvaluation(
        asset_key=result.asset_key,
        check_name=result.check_name,
        passed=result.passed,
        metadata=result.metadata,
        severity=result.severity,
        description=result.description,
        partition=partition,
    )


def _by_gate(rows: Any) -> dict[str, Row]:
    return {} if rows is None else {r["gate"]: r for r in rows.to_dict("records")}  # none: all fail closed


def gate_evaluations(
    rubric: RubricConfig, assets: set[str]
) -> Callable[[str, Any, Any], list[dg.AssetCheckEvaluation]]:
    """What the gates asset reports of one checkpoint it decided: every gate check's evaluation (from its new gate
    rows) and, for a judged rubric, the judge's completeness (read through ``reader``)."""
    _, targets = _check_specs(rubric, assets)
    judged = Table.JUDGE_SCORES in assets

    def evaluations(ckpt: str, rows: Any, reader: Any) -> list[dg.AssetCheckEvaluation]:
        by_gate = _by_gate(rows)
        out = [_evaluation(_result(name, target, by_gate.get(name)), ckpt) for name, target in targets.items()]
        if judged:
            out.append(_evaluation(_completeness(rubric, reader, ckpt), ckpt))
        return out

    return evaluations


def _each_partition(
    context: dg.AssetCheckExecutionContext, results: Callable[[str], Iterator[dg.AssetCheckResult]]
) -> Iterator[dg.AssetCheckResult]:
    """A check step's results: yielded for a run of one checkpoint; for a run of several, each checkpoint's
    reported as the evaluation of its partition (a result yielded there would belong to no partition)."""
    keys = run_partitions(context.op_execution_context)  # type: ignore[arg-type]
    if len(keys) == 1:
        yield from results(keys[0])
        return
    for key in keys:
        for result in results(key):
            context.op_execution_context.log_event(_evaluation(result, key))  # type: ignore[arg-type]


def gate_checks(rubric: RubricConfig, assets: set[str]) -> dg.AssetChecksDefinition:
    specs, targets = _check_specs(rubric, assets)

    @dg.multi_asset_check(specs=specs, name=f"{rubric.name}__gate_checks", can_subset=True)
    def checks(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> Iterator[dg.AssetCheckResult]:
        wh = warehouse.get()
        selected = {k.name for k in context.selected_asset_check_keys}

        def results(ckpt: str) -> Iterator[dg.AssetCheckResult]:
            with wh.hold():
                by_gate = _by_gate(partition_rows(wh, rubric, Table.GATES, ckpt))
            for name, target in targets.items():
                if name in selected:
                    yield _result(name, target, by_gate.get(name))

        yield from _each_partition(context, results)

    return checks


def _completeness(rubric: RubricConfig, wh: Any, ckpt: str) -> dg.AssetCheckResult:
    limit = rubric.completeness.max_missing_judge_scores
    missing, total, reasons = missing_judge_scores(wh, rubric, ckpt)
    share = missing / total if total else 1.0
    passed = total > 0 and share <= limit
    reason = (
        "no judge scores for this checkpoint (fails closed)"
        if not total
        else f"{missing} of {total} judge scores missing ({share:.1%}, at most {limit:.0%})"
        + (f"; most often: {next(iter(reasons))}" if reasons else "")
    )
    return dg.AssetCheckResult(
        asset_key=asset_key(rubric, Table.JUDGE_SCORES),
        check_name=COMPLETENESS,
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


COMPLETENESS = "judge_completeness"


def judge_completeness_check(rubric: RubricConfig) -> dg.AssetChecksDefinition:
    limit = rubric.completeness.max_missing_judge_scores
    spec = dg.AssetCheckSpec(
        COMPLETENESS,
        asset=asset_key(rubric, Table.JUDGE_SCORES),
        partitions_def=CHECKPOINTS,
        description=f"At most {limit:.0%} of the panel's scores missing (completeness.max_missing_judge_scores): "
        "a dead endpoint or a judge that answers garbage turns this red, with the reasons.",
    )

    # can_subset: over several checkpoints the step yields no result of its own (each is reported on its partition)
    @dg.multi_asset_check(specs=[spec], name=f"{rubric.name}__{COMPLETENESS}", can_subset=True)
    def judge_completeness(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[dg.AssetCheckResult]:
        wh = warehouse.get()

        def results(ckpt: str) -> Iterator[dg.AssetCheckResult]:
            with wh.hold():
                yield _completeness(rubric, wh, ckpt)

        yield from _each_partition(context, results)

    return judge_completeness
