"""Deterministic metrics: per-sample metric functions the rubric declares (with LLM extractions merged in)."""

import json
import time

import dagster as dg

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.types import Record, Row
from eval_pipeline.defs.asset import asset_key, rubric_asset
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.ingest.samples import load_samples, to_records
from eval_pipeline.metrics import compute_metrics
from eval_pipeline.metrics.style import TEXTSTAT_VERSION
from eval_pipeline.storage.warehouse import Warehouse


def _with_extractions(wh: Warehouse, rubric: RubricConfig, ckpt_id: str, records: list[Record]) -> list[Row]:
    """Merge LLM extractions (where they succeeded) into the records under the extraction's name."""
    ex = rubric.extraction
    if ex is None or not wh.table_exists(rubric.name, Table.EXTRACTIONS):
        return records
    rows = wh.read(
        rubric.name, Table.EXTRACTIONS, columns=("sample_id", "items"), where={"checkpoint_id": ckpt_id, "status": "ok"}
    )
    found = {sid: json.loads(items) for sid, items in zip(rows.sample_id, rows["items"])}
    return [{**r, ex.name: found.get(r["sample_id"])} for r in records]


def metrics_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @rubric_asset(
        rubric,
        Table.METRICS,
        deps=[asset_key(rubric, Table.SAMPLES)] + ([asset_key(rubric, Table.EXTRACTIONS)] if rubric.extraction else []),
        kinds={"duckdb", "python"},
        description="Deterministic per-sample metrics: " + ", ".join(m.function for m in rubric.metrics) + ".",
        metadata={"textstat_version": TEXTSTAT_VERSION},
    )
    def metrics(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        records = _with_extractions(wh, rubric, ckpt_id, to_records(rubric, load_samples(wh, rubric, ckpt_id)))
        t0 = time.perf_counter()
        df = compute_metrics(rubric.metrics, records)
        secs = time.perf_counter() - t0
        df.insert(0, "checkpoint_id", ckpt_id)
        df["rubric_version"] = rubric.version
        wh.replace_partition(rubric.name, Table.METRICS, df, {"checkpoint_id": ckpt_id})
        numeric = df.select_dtypes("number")
        means = {c: round(float(numeric[c].mean()), 4) for c in numeric.columns if numeric[c].notna().any()}
        return dg.MaterializeResult(
            metadata={
                "samples": dg.MetadataValue.int(len(df)),
                "means": dg.MetadataValue.json(means),
                "compute_s": dg.MetadataValue.float(round(secs, 3)),
                "textstat_version": dg.MetadataValue.text(TEXTSTAT_VERSION),
            }
        )

    return metrics
