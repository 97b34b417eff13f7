"""The one decorator every asset of a rubric group goes through, and the helpers asset bodies share.

It sets the key ``[<rubric>, <name>]``, the group, the checkpoint partitions, the
rubric's config hash as code version, the kinds and the table
metadata (``dagster/table_name`` on the definition; ``dagster/row_count`` and
``dagster/column_schema`` of the partition on every materialization).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import dagster as dg
import pandas as pd

from eval_pipeline.agreement.compute import judge_on_human_scale
from eval_pipeline.core import progress, settings
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import PANEL, Table
from eval_pipeline.defs.partitions import CHECKPOINTS
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.storage.tables import Filter
from eval_pipeline.storage.warehouse import Warehouse


def asset_key(rubric: RubricConfig | str, name: str) -> dg.AssetKey:
    """The asset ``<rubric>/<name>``: the asset that writes the table ``name`` of the rubric's schema."""
    return dg.AssetKey([rubric if isinstance(rubric, str) else rubric.name, name])


Body = Callable[..., dg.MaterializeResult[None]]  # an asset's body: its context, then its resources by name


# an asset a person launches (an alignment): never part of a checkpoint's evaluation (``evaluation``)
ON_DEMAND_TAG = "eval/on_demand"
ON_DEMAND_TAGS = {ON_DEMAND_TAG: "true"}


def evaluation(names: Sequence[str]) -> dg.AssetSelection:
    """What evaluating a checkpoint materializes: the rubric groups ``names`` without their on-demand assets."""
    return dg.AssetSelection.groups(*names) - dg.AssetSelection.tag(ON_DEMAND_TAG, "true")


def rubric_asset(
    rubric: RubricConfig,
    name: str,
    *,
    description: str,
    kinds: set[str],
    deps: Sequence[dg.AssetKey | dg.AssetDep] = (),
    metadata: dict[str, Any] | None = None,
    table: bool = True,
    partitioned: bool = True,
    automation_condition: dg.AutomationCondition[Any] | None = None,
    tags: dict[str, str] | None = None,
    group: str | None = None,
) -> Callable[[Body], dg.AssetsDefinition]:
    """One decorator for every asset of a rubric group (``_step``: progress, the step scope, table metadata).
    ``partitioned`` False: an asset over every checkpoint (a pool, defs/assets/pools.py); its ``deps`` are given as
    ``dg.AssetDep`` with the partition mapping that says which partitions it reads."""
    md: dict[str, Any] = {"rubric_version": rubric.version, **(metadata or {})}
    if table:
        md["dagster/table_name"] = f"{rubric.name}.{name}"

    def decorate(fn: Body) -> dg.AssetsDefinition:
        return dg.asset(
            key=asset_key(rubric, name),
            group_name=group or rubric.name,
            partitions_def=CHECKPOINTS if partitioned else None,
            code_version=rubric.version,
            automation_condition=automation_condition,
            deps=list(deps),
            kinds=kinds,
            description=description,
            metadata=md,
            tags=tags,
        )(_step(fn, rubric.name, name, table))

    return decorate


def _step(fn: Body, rubric: str, name: str, table: bool) -> Body:
    """The asset body as Dagster calls it (its context, then its resources by name: ``warehouse`` among them; the
    signature Dagster reads is ``fn``'s, through ``functools.wraps``): progress events for a listening console, the
    body inside the backend's step scope (``Warehouse.hold``: its many short connections share what the backend
    keeps open), and, for a table, the partition's row count and the table's column schema added to what it
    returns."""

    @functools.wraps(fn)
    def step(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource, **resources: object
    ) -> dg.MaterializeResult[None]:
        ckpt = context.partition_key if context.has_partition_key else None
        progress.emit("step", rubric=rubric, asset=name, checkpoint=ckpt, phase="start")
        wh = warehouse.get()
        start = time.time()
        try:
            with wh.hold():
                result = fn(context, warehouse, **resources)
                return _with_table_metadata(result, wh, rubric, name, ckpt) if table else result
        finally:
            context.log.debug(f"warehouse held from {start:.3f} to {time.time():.3f}")  # when this step had it
            progress.emit("step", rubric=rubric, asset=name, checkpoint=ckpt, phase="end")

    return step


def _with_table_metadata(
    result: dg.MaterializeResult[None], wh: Warehouse, schema: str, table: str, ckpt_id: str | None
) -> dg.MaterializeResult[None]:
    """``result`` with the partition's row count and the table's column schema (a MaterializeResult; else as it is)."""
    if not isinstance(result, dg.MaterializeResult):
        return result
    known = wh.known_tables()  # the columns as this process last saw them, when it may remember them
    seen = known.get((schema, table)) if known is not None else None
    cols = list((seen or wh.columns(schema, table)).items())
    if not cols:
        return result
    where = {"checkpoint_id": ckpt_id} if ckpt_id is not None else {}  # a pool's table: all of it
    n = wh.rows_written(schema, table, where)
    if n is None:  # not written through this object's partition replacement: counted
        n = wh.count(schema, table, where)
    extra: dict[str, Any] = {
        "dagster/row_count": dg.MetadataValue.int(int(n)),
        "dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn(c, t) for c, t in cols]),
    }
    return dg.MaterializeResult(
        asset_key=result.asset_key,
        metadata={**(result.metadata or {}), **extra},
        check_results=result.check_results,
        data_version=result.data_version,
        tags=result.tags,
    )


def viewer_link(rubric: RubricConfig, checkpoint_id: str, page: str = "") -> dg.MetadataValue:
    """A link to this checkpoint's page (or its ``samples`` page) in `eval-pipeline view`."""
    url = f"{settings.view_url()}/r/{quote(rubric.name)}/{quote(checkpoint_id)}" + (f"/{page}" if page else "")
    return dg.MetadataValue.url(url)


def rounded(value: float | None, digits: int = 4) -> dg.MetadataValue:
    """A float for display and for the Plots tab: rounded; NaN when there is none."""
    if value is None or value != value:
        return dg.MetadataValue.float(float("nan"))
    return dg.MetadataValue.float(round(float(value), digits))


def partition_rows(
    wh: Warehouse,
    rubric: RubricConfig,
    table: str,
    checkpoint_id: str,
    required: bool = False,
    columns: Sequence[str] = (),
    equal: Mapping[str, Filter] | None = None,
) -> pd.DataFrame | None:
    """One checkpoint's rows of `<rubric>.<table>` (its ``columns``, by name; default: all), those whose columns
    hold the values ``equal`` gives (bound as parameters); None when the table does not exist yet, or a clear
    failure when the caller needs it (its upstream asset has never been materialized)."""
    if not wh.table_exists(rubric.name, table):
        if required:
            raise dg.Failure(f"{rubric.name}.{table} does not exist yet: materialize [{rubric.name}, {table}] first")
        return None
    return wh.read(rubric.name, table, columns=columns, where={"checkpoint_id": checkpoint_id, **(equal or {})})


def required_rows(
    wh: Warehouse,
    rubric: RubricConfig,
    table: str,
    checkpoint_id: str,
    columns: Sequence[str] = (),
    equal: Mapping[str, Filter] | None = None,
) -> pd.DataFrame:
    df = partition_rows(wh, rubric, table, checkpoint_id, required=True, columns=columns, equal=equal)
    assert df is not None  # required=True raised otherwise
    return df


def panel_on_human_scale(wh: Warehouse, rubric: RubricConfig, checkpoint_ids: Sequence[str]) -> pd.DataFrame:
    """The panel's judge_scores of these checkpoints on the scale people rate (checkpoint_id, sample_id,
    dimension, score): what the human-calibrated estimates read beside the ratings."""
    judge = wh.read(
        rubric.name,
        Table.JUDGE_SCORES,
        columns=("checkpoint_id", "sample_id", "dimension", "kind", "judge", "score"),
        where={"checkpoint_id": tuple(checkpoint_ids), "judge": PANEL},
    )
    return judge_on_human_scale(rubric, judge)


def recorded_judge(wh: Warehouse, rubric: RubricConfig, checkpoint_id: str) -> tuple[str, str] | None:
    """(identity, label) of the judge that scored this checkpoint (``<rubric>.judge_identity``); None when none
    was recorded (not judged yet, or judged by a version that did not record it)."""
    rows = partition_rows(wh, rubric, Table.JUDGE_IDENTITY, checkpoint_id, columns=("judge_identity", "label"))
    if rows is None or rows.empty:
        return None
    return str(rows.judge_identity.iloc[0]), str(rows.label.iloc[0])
