"""``judge_alignment``: align the rubric's judge to people's ratings, on demand (eval_pipeline.judge.align).

Unpartitioned, never automated, in a group of its own beside the rubric's (``<rubric>_align``): it reads every
checkpoint's samples and ratings (and the calibration pool, so the UI shows where its ratings come from), runs when a
person launches it (``eval-pipeline align``, the UI's Materialize with its config, or the ``<rubric>_align`` job),
and writes ``<rubric>.judge_alignment`` and ``<rubric>.judge_alignment_items`` for its alignment id in one
transaction (earlier alignments are kept). It changes no judge: adopting one is a person's step (``eval-pipeline
align --adopt``). A checkpoint's evaluation leaves it out (``ON_DEMAND``), and so does materializing the rubric's
group.
"""

import datetime as dt
from typing import Any

import dagster as dg

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import ALL_CHECKPOINTS, Table
from eval_pipeline.defs.asset import ON_DEMAND_TAGS, asset_key, rubric_asset
from eval_pipeline.defs.assets.judge import judge_step
from eval_pipeline.defs.assets.pools import across
from eval_pipeline.defs.resources import JudgeResource, WarehouseResource
from eval_pipeline.judge.align import AlignError, align, frames, rated_items


def alignment_group(rubric: RubricConfig) -> str:
    """The group beside the rubric's own that holds its alignment: a person's tool, so that materializing or
    backfilling the rubric's group (the UI's "Materialize all") never runs an alignment."""
    return f"{rubric.name}_align"


class AlignConfig(dg.Config):
    """What to align (empty: every dimension people rate) and the run's limits over the rubric's ``align:``."""

    dimensions: list[str] = []
    max_candidates: int | None = None
    max_calls: int | None = None
    max_cost: float | None = None
    holdout_share: float | None = None


def judge_alignment_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    deps: list[dg.AssetKey | dg.AssetDep] = [
        *across(rubric, Table.SAMPLES, Table.HUMAN_RATINGS),
        asset_key(rubric, Table.CALIBRATION_POOL),
    ]

    @rubric_asset(
        rubric,
        Table.JUDGE_ALIGNMENT,
        deps=deps,
        kinds={"duckdb"},
        partitioned=False,
        tags=ON_DEMAND_TAGS,
        group=alignment_group(rubric),
        description="On demand: search the judge's configurations (instruction variants, few-shot examples from "
        "rated samples, score source, temperature; the offline judge's feature weights) by cross-validated "
        "agreement with people on part of the rated samples, and compare the best with the current judge on a "
        "held-out share it never saw (paired interval). Recommends a new judge only when the held-out gain's "
        "interval is above zero; adopting it is `eval-pipeline align --adopt <id>`.",
    )
    def judge_alignment(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource, judge: JudgeResource, config: AlignConfig
    ) -> dg.MaterializeResult[None]:
        wh = warehouse.get()
        dims = list(config.dimensions) or list(rubric.rating_scales)
        overrides = {k: v for k, v in config.model_dump().items() if k != "dimensions" and v is not None}
        spec = rubric.align.model_copy(update=overrides)
        with judge_step(context, wh, judge, rubric, Table.JUDGE_ALIGNMENT, partition=ALL_CHECKPOINTS) as usage:
            items = rated_items(wh, rubric, dims)
            try:
                result = align(
                    rubric, judge.config().with_(call_mode="online"), wh, items, dims, spec, context.log.info
                )
            except AlignError as exc:
                raise dg.Failure(description=str(exc), allow_retries=False) from None
            table, roles = frames(result, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
            with wh.partition_writer() as w:
                w.write(rubric.name, Table.JUDGE_ALIGNMENT, table, {"alignment_id": result.id})
                w.write(rubric.name, Table.JUDGE_ALIGNMENT_ITEMS, roles, {"alignment_id": result.id})
        return usage.result(
            {
                "alignment_id": dg.MetadataValue.text(result.id),
                "verdict": dg.MetadataValue.text(result.verdict),
                "recommended": dg.MetadataValue.bool(result.recommended),
                "candidates": dg.MetadataValue.int(len(result.tried)),
                "heldout_gain": dg.MetadataValue.float(round(result.gain, 4)),
                "adopt": dg.MetadataValue.text(
                    f"eval-pipeline align --rubric {rubric.name} --adopt {result.id}" if result.recommended else "-"
                ),
            }
        )

    return judge_alignment


def align_job(rubric: RubricConfig) -> Any:
    """The group's alignment as a job of its own, for the UI's launchpad."""
    return dg.define_asset_job(
        f"{rubric.name}_align",
        selection=dg.AssetSelection.assets(asset_key(rubric, Table.JUDGE_ALIGNMENT)),
        description=f"Align {rubric.name}'s judge to people's ratings (held-out share kept apart).",
    )
