"""The verdict: one per checkpoint and rubric (scoring.verdict), decided after everything it speaks of, for every
checkpoint at once: a checkpoint is decided again when what it is decided from changed (defs/assets/decisions.py),
and its row names the calibration pool it was decided on (``pool_version``)."""

import dagster as dg

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import MAIN, Table
from eval_pipeline.defs.asset import asset_key, decision_asset
from eval_pipeline.defs.assets.decisions import Inputs, Prefetched, commit_rows, decided_metadata
from eval_pipeline.defs.assets.pools import across
from eval_pipeline.defs.assets.scoring import DECIDED
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.scoring import verdict as verdicts
from eval_pipeline.storage import versions
from eval_pipeline.storage.views import refresh_views
from eval_pipeline.storage.warehouse import Warehouse

# the decisions a verdict reads: the gates and what they read
READS = (Table.GATES, *DECIDED)


def verdict_asset(rubric: RubricConfig, upstream: list[dg.AssetKey], decided: set[str]) -> dg.AssetsDefinition:
    """``upstream``: every asset of the group the verdict is decided after; ``decided``: those that are decisions
    across checkpoints (unpartitioned), read as they are; the others, every checkpoint's partition of them."""
    deps: list[dg.AssetKey | dg.AssetDep] = []
    for key in upstream:
        deps += [key] if key.path[-1] in decided else across(rubric, key.path[-1])

    @decision_asset(
        rubric,
        Table.VERDICT,
        deps,
    )
    def verdict(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        """Each checkpoint's verdict on this rubric, decided from everything before it: incomplete, regressed, failed
        gates, judge untrusted, pending ratings or passed, with the reasons, the counts, the judge's trust per dimension
        and the calibration pool it was decided on. The console, the viewer, the report, export and main.leaderboard
        read it (main.verdicts)."""
        wh = warehouse.get()
        metadata = _decide(context, wh)
        return dg.MaterializeResult(metadata={**metadata, **_upkeep(context, wh, (rubric.name, MAIN))})

    def _decide(context: dg.AssetExecutionContext, wh: Warehouse) -> dict[str, dg.MetadataValue]:
        d = Inputs(wh, rubric)
        ckpts = [c for c in d.checkpoints if d.has(Table.SCORES, c)]
        pool = (
            versions.frame_version(wh.read(rubric.name, Table.CALIBRATION_POOL))
            if wh.table_exists(rubric.name, Table.CALIBRATION_POOL)
            else versions.ABSENT
        )
        # what a verdict is decided from, in two parts: the checkpoint's own rows (what it counts) and the rest
        own = {c: d.fingerprint(d.everything(c)) for c in ckpts}
        fp = {c: d.in_two(own[c], d.fingerprint(d.decisions(c, *READS), pool)) for c in ckpts}
        todo = d.todo(Table.VERDICT, fp)
        if not todo:
            return decided_metadata(len(ckpts), [])
        reader = Prefetched(wh, todo)
        before = reader.read(rubric.name, Table.VERDICT, where={"checkpoint_id": tuple(todo)})
        kept = {str(r["checkpoint_id"]): r for r in before.to_dict("records")} if len(before) else {}
        # a checkpoint whose own rows did not change since it was decided: its counts are taken from its row
        counted = {
            c: verdicts.Verdict.from_row(kept[c])
            for c in todo
            if c in kept and d.first_unchanged(Table.VERDICT, c, own[c])
        }
        decided = verdicts.decide_all(reader, rubric, todo, counted)  # type: ignore[arg-type]
        for v in decided.values():
            v.pool_version = pool
        rows = verdicts.stored_rows(
            list(decided.values()), list(kept.values()), context.run.run_id, wh.current_snapshot()
        )
        commit_rows(wh, rubric, Table.VERDICT, fp, todo, rows)
        refresh_views(wh)
        last = decided[todo[-1]]
        return decided_metadata(
            len(ckpts),
            todo,
            verdict=dg.MetadataValue.text(f"{last.checkpoint_id}: {last.verdict}"),
            counts=dg.MetadataValue.text(last.summary),
            judge_trust=dg.MetadataValue.text(last.trust),
        )

    return verdict


def _upkeep(context: dg.AssetExecutionContext, wh: Warehouse, schemas: tuple[str, ...]) -> dict[str, dg.MetadataValue]:
    """The warehouse's upkeep when it is due (storage backend ``upkeep``: a lake's small files merged), done by
    the step that ends a rubric's run and said in its metadata; a failure of it is logged, never the run's."""
    try:
        done = wh.upkeep(schemas)
    except Exception as exc:  # noqa: BLE001 - upkeep is owed again next run; the verdicts are written
        context.log.warning(f"warehouse upkeep did not finish (done by a later run): {type(exc).__name__}: {exc}")
        return {}
    return {"warehouse_upkeep": dg.MetadataValue.text(done)} if done else {}


__all__ = ["verdict_asset", "asset_key"]
