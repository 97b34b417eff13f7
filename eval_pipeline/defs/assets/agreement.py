"""Agreement: human-human and judge-human statistics per dimension, for this checkpoint and for all."""

import dagster as dg
import pandas as pd

from eval_pipeline.agreement.compute import compute_agreement
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import ALL_CHECKPOINTS, JUDGE_VS_HUMAN_MEAN, PANEL
from eval_pipeline.defs.asset import asset_key, partition_rows, required_rows, rubric_asset
from eval_pipeline.defs.resources import WarehouseResource


def _kappas(df: pd.DataFrame) -> dict[str, float]:
    return {r.dimension: round(r.value, 3) for r in df.itertuples() if r.value == r.value}


def agreement_asset(rubric: RubricConfig, has_judge: bool) -> dg.AssetsDefinition:
    deps = [asset_key(rubric, "human_ratings")] + ([asset_key(rubric, "judge_scores")] if has_judge else [])

    @rubric_asset(
        rubric,
        "agreement",
        deps=deps,
        kinds={"duckdb"},
        description="Agreement per dimension: percent agreement, Cohen's kappa (unweighted, linear, quadratic over the "
        "full scale), Fleiss' kappa, Krippendorff's alpha (nominal, ordinal, interval), ICC (absolute, consistency); "
        "judge vs humans: Spearman, Kendall, MAE, bias and kappa; prevalence and ceiling share beside every kappa. "
        f"Rows for this checkpoint and, refreshed on every run, for {ALL_CHECKPOINTS} checkpoints.",
    )
    def agreement(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        ratings = required_rows(wh, rubric, "human_ratings", ckpt_id)
        judge = partition_rows(wh, rubric, "judge_scores", ckpt_id) if has_judge else None
        df = compute_agreement(rubric, ckpt_id, ratings, judge)
        wh.replace_partition(rubric.name, "agreement", df, {"checkpoint_id": ckpt_id})
        all_ratings = wh.query_df(f'SELECT * FROM "{rubric.name}".human_ratings')
        all_judge = (
            wh.query_df(f'SELECT * FROM "{rubric.name}".judge_scores WHERE judge = ?', [PANEL]) if has_judge else None
        )
        overall = compute_agreement(rubric, ALL_CHECKPOINTS, all_ratings, all_judge)
        wh.replace_partition(rubric.name, "agreement", overall, {"checkpoint_id": ALL_CHECKPOINTS})
        quadratic = df[df.statistic == "cohen_kappa_quadratic"]
        judged = _kappas(quadratic[quadratic.raters == JUDGE_VS_HUMAN_MEAN])
        return dg.MaterializeResult(
            metadata={
                # judge vs human mean per dimension as numbers (the Plots tab draws them across checkpoints)
                **{f"judge_human_kappa_{dim}": dg.MetadataValue.float(v) for dim, v in judged.items()},
                "rows": dg.MetadataValue.int(len(df)),
                "judge_human_kappa_quadratic": dg.MetadataValue.json(
                    _kappas(quadratic[quadratic.raters == JUDGE_VS_HUMAN_MEAN])
                ),
                "human_human_kappa_quadratic": dg.MetadataValue.json(
                    _kappas(quadratic[quadratic.raters != JUDGE_VS_HUMAN_MEAN])
                ),
            }
        )

    return agreement
