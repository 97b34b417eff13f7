"""The one decorator every asset of a rubric group goes through, and the helpers asset bodies share.

It sets the key ``[<rubric>, <name>]``, the group, the checkpoint partitions, the
rubric's config hash as code version, the kinds and the table
metadata (``dagster/table_name`` on the definition; ``dagster/row_count`` and
``dagster/column_schema`` of the partition on every materialization).

A partitioned asset runs over many checkpoints in one run (Dagster's backfill policy: at most
``EVAL_BACKFILL_CHUNK`` partitions a run): its body is called once per checkpoint of the run, each checkpoint's
writes atomic as before, and after them the content version of each checkpoint's rows of every table it writes
is recorded (storage.versions), which is what the decisions across checkpoints read to know what changed.
"""

from __future__ import annotations

import functools
import inspect
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any
from urllib.parse import quote

import dagster as dg
import pandas as pd

from eval_pipeline.core import progress, settings
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.defs.automation import REDECIDE
from eval_pipeline.defs.inflight import checkpoints_held
from eval_pipeline.defs.partitions import CHECKPOINTS, CHECKPOINTS_PARTITION
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.scoring.compared import rows_of
from eval_pipeline.storage import versions
from eval_pipeline.storage.tables import Filter
from eval_pipeline.storage.warehouse import Reader, Warehouse


def asset_key(rubric: RubricConfig | str, name: str) -> dg.AssetKey:
    """The asset ``<rubric>/<name>``: the asset that writes the table ``name`` of the rubric's schema."""
    return dg.AssetKey([rubric if isinstance(rubric, str) else rubric.name, name])


Body = Callable[..., dg.MaterializeResult[None]]  # an asset's body: its context, then its resources by name


# an asset a person launches (an alignment): never part of a checkpoint's evaluation (``evaluation``)
ON_DEMAND_TAG = "eval/on_demand"
ON_DEMAND_TAGS = {ON_DEMAND_TAG: "true"}


def evaluation(names: Sequence[str]) -> dg.AssetSelection:
    """What evaluating a checkpoint materializes: the rubric groups ``names`` without their on-demand assets, and
    without the asset checks as steps of their own (the gates asset reports each checkpoint's, defs/checks.py)."""
    return (dg.AssetSelection.groups(*names) - dg.AssetSelection.tag(ON_DEMAND_TAG, "true")).without_checks()


# (version name, schema, table, the rows' other partition columns): a table an asset writes, besides its own
Versioned = tuple[str, str, str, dict[str, str]]


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
    also_writes: Sequence[Versioned] = (),
) -> Callable[[Body], dg.AssetsDefinition]:
    """One decorator for every asset of a rubric group (``_step``: progress, the step scope, table metadata, the
    content versions of what a partitioned asset wrote: its table and ``also_writes``).
    ``partitioned`` False: an asset over every checkpoint (a pool or a decision, defs/assets/pools.py and
    decisions.py); its ``deps`` are given as ``dg.AssetDep`` with the partition mapping that says which partitions
    it reads."""
    md: dict[str, Any] = {"rubric_version": rubric.version, **(metadata or {})}
    if table:
        md["dagster/table_name"] = f"{rubric.name}.{name}"
    written: list[Versioned] = []
    if partitioned:
        written = [(name, rubric.name, name, {})] if table else []
        written += list(also_writes)

    def decorate(fn: Body) -> dg.AssetsDefinition:
        with warnings.catch_warnings():  # the backfill policy is Dagster's (beta): not the user's business
            warnings.simplefilter("ignore", dg.BetaWarning)
            return _asset(fn)

    def _asset(fn: Body) -> dg.AssetsDefinition:
        return dg.asset(
            key=asset_key(rubric, name),
            group_name=group or rubric.name,
            partitions_def=CHECKPOINTS if partitioned else None,
            backfill_policy=dg.BackfillPolicy.multi_run(settings.backfill_chunk()) if partitioned else None,
            code_version=rubric.version,
            automation_condition=automation_condition,
            deps=list(deps),
            kinds=kinds,
            description=description,
            metadata=md,
            tags=tags,
        )(_step(fn, rubric.name, name, table, written))

    return decorate


class OnePartition:
    """A step's context seen for one of the checkpoints of its run: ``partition_key`` is that checkpoint; the rest
    is the step's context."""

    has_partition_key = True

    def __init__(self, context: dg.AssetExecutionContext, key: str) -> None:
        self._context, self.partition_key = context, key

    @property
    def partition_keys(self) -> list[str]:
        return [self.partition_key]

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._context, attr)


def in_range(context: Any) -> bool:
    """Whether a step body is called for one checkpoint of a run over several (``OnePartition``): what only the
    step's own result would show (a chart across checkpoints) is not drawn for each of them, since a range run's
    result keeps each checkpoint's scalar figures only (``_merged``)."""
    return isinstance(context, OnePartition)


def run_partitions(context: dg.AssetExecutionContext) -> list[str]:
    """The checkpoints of this step's run: one, several (a run over a range of them), none (unpartitioned)."""
    if context.has_partition_key:
        return [context.partition_key]
    if context.assets_def.partitions_def is None:
        return []
    return list(context.partition_keys)


def run_checkpoints(context: dg.AssetExecutionContext) -> list[str]:
    """The checkpoints a run was launched for (its partition, or its range of them), whatever the step: an
    unpartitioned step of the run too (read from the run's tags: ``runs.checkpoints_held``)."""
    return checkpoints_held(context.run, list(context.instance.get_dynamic_partitions(CHECKPOINTS_PARTITION)))


def _step(fn: Body, rubric: str, name: str, table: bool, written: Sequence[Versioned] = ()) -> Body:
    """The asset body as Dagster calls it (its context, then its resources by name: ``warehouse`` among them; the
    signature Dagster reads is ``fn``'s, through ``functools.wraps``): progress events for a listening console, the
    body inside the backend's step scope (``Warehouse.hold``: its many short connections share what the backend
    keeps open), and, for a table, the partition's row count and the table's column schema added to what it
    returns. A partitioned body is called once per checkpoint of the run (in the run's order); then the content
    versions of what it wrote are recorded (one query per table, one write), and a one-checkpoint result carries
    its table's version as its data version."""

    @functools.wraps(fn)
    def step(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource, **resources: object
    ) -> dg.MaterializeResult[None]:
        wh = warehouse.get()
        start = time.time()
        keys = run_partitions(context)
        results: list[dg.MaterializeResult[None]] = []
        try:
            with wh.hold():
                # a range of checkpoints: their replacements written together, table by table (storage.batching),
                # and each table they read read once for all of them (storage.ranging)
                with wh.batched() if len(keys) > 1 else nullcontext(), wh.ranged(keys):
                    each: list[str | None] = list(keys) or [None]
                    for ckpt in each:
                        progress.emit("step", rubric=rubric, asset=name, checkpoint=ckpt, phase="start")
                        try:
                            one: Any = context if ckpt is None or len(keys) == 1 else OnePartition(context, ckpt)
                            result = fn(one, warehouse, **resources)
                            results.append(_with_table_metadata(result, wh, rubric, name, ckpt) if table else result)
                        finally:
                            progress.emit("step", rubric=rubric, asset=name, checkpoint=ckpt, phase="end")
                found = _record_versions(wh, rubric, keys, written)
        finally:
            context.log.debug(f"warehouse held from {start:.3f} to {time.time():.3f}")  # when this step had it
        if len(results) == 1:
            only = results[0]
            if found and keys and isinstance(only, dg.MaterializeResult) and only.data_version is None:
                own = found.get(name, {}).get(keys[0])
                return _replace(only, data_version=dg.DataVersion(own)) if own else only
            return only
        return _merged(keys, results, found.get(name, {}))

    return step


def _record_versions(
    wh: Warehouse, rubric: str, keys: list[str], written: Sequence[Versioned]
) -> dict[str, dict[str, str]]:
    if not keys or not written:
        return {}
    found = {
        label: versions.content_versions(wh, schema, table, keys, equal or None)
        for label, schema, table, equal in written
    }
    versions.record(wh, rubric, found)
    return found


def _replace(result: dg.MaterializeResult[None], **changes: Any) -> dg.MaterializeResult[None]:
    fields = {
        "asset_key": result.asset_key,
        "metadata": result.metadata,
        "check_results": result.check_results,
        "data_version": result.data_version,
        "tags": result.tags,
    }
    return dg.MaterializeResult(**{**fields, **changes})


def _scalar(value: Any) -> float | int | str | bool | None:
    """A metadata entry's plain value when it is one number, flag or string (a link's: its address), else None."""
    raw = getattr(value, "value", value)
    if isinstance(raw, float) and raw != raw:
        return None  # NaN: no figure (JSON has none)
    return raw if isinstance(raw, (bool, int, float, str)) else None


def _merged(
    keys: list[str], results: list[dg.MaterializeResult[None]], own: dict[str, str]
) -> dg.MaterializeResult[None]:
    """The result of a step over several checkpoints: how many, the rows written in all, each checkpoint's own
    figures (``by_checkpoint``: its scalar metadata, its viewer link among them) and one data version over theirs.
    Dagster records one result for every checkpoint of a range run (it has no per-partition metadata there:
    dagster-io/dagster#18123), so each checkpoint's figures are kept under its name rather than lost."""
    rows = 0
    each: dict[str, dict[str, Any]] = {}
    for ckpt, r in zip(keys, results):
        md = (r.metadata or {}) if isinstance(r, dg.MaterializeResult) else {}
        value: Any = md.get("dagster/row_count")
        rows += int(getattr(value, "value", value) or 0)
        scalars = {k: _scalar(v) for k, v in md.items() if not k.startswith("dagster/")}
        each[ckpt] = {k: v for k, v in scalars.items() if v is not None}
    metadata: dict[str, Any] = {"checkpoints_in_run": dg.MetadataValue.int(len(results))}
    if rows:
        metadata["dagster/row_count"] = dg.MetadataValue.int(rows)
    if any(each.values()):
        metadata["by_checkpoint"] = dg.MetadataValue.json(each)
    version = versions.fingerprint(sorted(own.items())) if own else None
    return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(version) if version else None)


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
    wh: Reader,
    rubric: RubricConfig,
    table: str,
    checkpoint_id: str,
    required: bool = False,
    columns: Sequence[str] = (),
    equal: Mapping[str, Filter] | None = None,
) -> pd.DataFrame | None:
    """One checkpoint's rows of `<rubric>.<table>` (``scoring.compared.rows_of``); None when the table does not
    exist yet, or a clear failure when the caller needs it (its upstream asset has never been materialized)."""
    if required and not wh.table_exists(rubric.name, table):
        raise dg.Failure(f"{rubric.name}.{table} does not exist yet: materialize [{rubric.name}, {table}] first")
    return rows_of(wh, rubric, table, checkpoint_id, columns, dict(equal or {}))


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


def decision_asset(
    rubric: RubricConfig, name: str, deps: Sequence[dg.AssetKey | dg.AssetDep], description: str = "", **fields: str
) -> Callable[[Body], dg.AssetsDefinition]:
    """``rubric_asset`` of a decision across checkpoints: unpartitioned, in DuckDB, decided again by the
    automation when what it reads changed (``defs.automation.REDECIDE``); ``deps`` say which partitions it reads.
    Its description is ``description``, else the body's docstring with ``fields`` filled into its ``{name}``s."""

    def decorate(fn: Body) -> dg.AssetsDefinition:
        text = description or " ".join((inspect.getdoc(fn) or "").split()).format(**fields)
        return rubric_asset(
            rubric,
            name,
            deps=deps,
            kinds={"duckdb"},
            partitioned=False,
            automation_condition=REDECIDE,
            description=text,
        )(fn)

    return decorate
