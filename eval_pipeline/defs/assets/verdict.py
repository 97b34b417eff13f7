"""The verdict: one per checkpoint and rubric, decided once (scoring.verdict) after everything it speaks of."""

import dagster as dg

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.defs.asset import rubric_asset, viewer_link
from eval_pipeline.defs.automation import REDECIDE
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.scoring import verdict as verdicts
from eval_pipeline.storage.views import refresh_views


def verdict_asset(rubric: RubricConfig, upstream: list[dg.AssetKey]) -> dg.AssetsDefinition:
    @rubric_asset(
        rubric,
        Table.VERDICT,
        deps=upstream,
        kinds={"duckdb"},
        automation_condition=REDECIDE,
        description="The checkpoint's verdict on this rubric, decided once from everything before it: incomplete, "
        "regressed, failed gates, judge untrusted, pending ratings or passed, with the reasons, the counts and the "
        "judge's trust per dimension. The console, the viewer, the report, export and main.leaderboard read it "
        "(main.verdicts).",
    )
    def verdict(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        decided = verdicts.decide(wh, rubric, ckpt_id)
        verdicts.store(wh, decided, context.run.run_id, wh.current_snapshot())
        refresh_views(wh)
        return dg.MaterializeResult(
            metadata={
                "verdict": dg.MetadataValue.text(decided.verdict),
                "reasons": dg.MetadataValue.json([{"about": t, "text": x} for t, x in decided.reasons]),
                "counts": dg.MetadataValue.text(decided.summary),
                "judge_trust": dg.MetadataValue.text(decided.trust),
                "viewer": viewer_link(rubric, ckpt_id),
            }
        )

    return verdict
