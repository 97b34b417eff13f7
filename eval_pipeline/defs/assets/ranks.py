"""Rank sets across checkpoints (#74, scoring.ranks): decided once for every checkpoint, in one step, when the
scores, the judges or the calibrated means of any checkpoint changed (defs/assets/decisions.py's fingerprints, one
for the whole ranking); otherwise nothing is read past the fingerprints. Landing a checkpoint re-ranks without a
judge call: the ranking reads stored scores only."""

import dagster as dg

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.defs.asset import asset_key, decision_asset
from eval_pipeline.defs.assets.decisions import Inputs, commit_rows, decided_metadata
from eval_pipeline.defs.assets.pools import across
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.scoring.ranks import rank_table
from eval_pipeline.storage.views import refresh_views

READS = (Table.SCORES, Table.JUDGE_IDENTITY)


def ranks_asset(rubric: RubricConfig, has_judge: bool) -> dg.AssetsDefinition:
    deps: list[dg.AssetKey | dg.AssetDep] = [*across(rubric, Table.SCORES)]
    if has_judge:
        # the judge's identity is written by the judge_scores asset; the calibrated means by agreement
        deps += [*across(rubric, Table.JUDGE_SCORES), asset_key(rubric, Table.AGREEMENT)]
    deps.append(asset_key(rubric, Table.CHECKPOINT_LINEAGE))

    @decision_asset(
        rubric,
        Table.RANKS,
        deps,
    )
    def ranks(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        """Every checkpoint's simultaneous 95 % confidence set of its rank on the headline among the checkpoints the
        same judge judged (rank 1 the best; pairs by max-t intervals, paired over shared samples; human-calibrated where
        people rated every one), and whom it is tied with. Ranked again, all at once, only when some checkpoint's
        scores, judge or calibrated means changed. The leaderboard, console, viewer, report and export read it."""
        wh = warehouse.get()
        d = Inputs(wh, rubric)
        ckpts = [c for c in d.checkpoints if d.has(Table.SCORES, c)]
        # one fingerprint for the whole ranking: any checkpoint's inputs moving re-ranks them all
        whole = d.fingerprint(*((c, d.own(c, *READS), d.decisions(c, Table.AGREEMENT)) for c in ckpts))
        fp = {c: whole for c in ckpts}
        if not d.todo(Table.RANKS, fp):
            return dg.MaterializeResult(metadata=decided_metadata(len(ckpts), []))
        rows = rank_table(wh, rubric, ckpts)
        commit_rows(wh, rubric, Table.RANKS, fp, ckpts, rows)
        refresh_views(wh)
        best = rows[rows.rank_low == 1]
        return dg.MaterializeResult(
            metadata=decided_metadata(
                len(ckpts),
                ckpts,
                ranked_first=dg.MetadataValue.text("; ".join(best.checkpoint_id + ": " + best.rank_set)),
            )
        )

    return ranks
