"""Publishing for people: evaluator worklists (the report is redrawn by the gates asset, views by summary)."""

import dagster as dg

from eval_pipeline.agreement.compute import rater_sets
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.defs.asset import asset_key, required_rows, rubric_asset
from eval_pipeline.defs.resources import PublishTargets, WarehouseResource
from eval_pipeline.ingest.samples import load_samples
from eval_pipeline.publish.worklists import write_worklists


def worklists_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @rubric_asset(
        rubric,
        Table.WORKLISTS,
        deps=[asset_key(rubric, Table.SAMPLES), asset_key(rubric, Table.HUMAN_RATINGS)],
        kinds={"csv"},
        description="Evaluator worklists as CSVs in data/worklists/<rubric>/<checkpoint>/: the stratified pilot set, "
        "the seeded 5 % spot check, the re-review list and a blank scoring sheet. Formula-like cells are neutralised.",
        table=False,
    )
    def worklists(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource, publish: PublishTargets
    ) -> dg.MaterializeResult[None]:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        samples = load_samples(wh, rubric, ckpt_id)
        ratings = rater_sets(rubric, required_rows(wh, rubric, Table.HUMAN_RATINGS, ckpt_id))["human"]  # people's work
        root = publish.worklist_folder()
        counts = write_worklists(rubric, ckpt_id, samples, ratings, root=root)
        publish.publish(sorted(p for p in (root / rubric.name / ckpt_id).glob("*.csv")))
        return dg.MaterializeResult(
            metadata={
                "folder": dg.MetadataValue.path(f"{publish.worklist_dir}/{rubric.name}/{ckpt_id}"),
                **{name.replace(".csv", ""): dg.MetadataValue.int(n) for name, n in counts.items()},
            }
        )

    return worklists
