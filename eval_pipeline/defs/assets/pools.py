"""The two assets of a rubric group that span every checkpoint, so the graph says what crosses partitions.

- ``calibration_pool``: the judge's calibration set, every rated sample of every checkpoint with the identity of
  the judge that scored it and the chance it had of being rated (the active queue's, or the uniform share). It
  reads every partition of ``samples``, ``human_ratings`` and ``judge_scores`` (``AllPartitionMapping``);
  ``agreement`` of each checkpoint reads its pooled verdict on the judge from it.
- ``checkpoint_lineage``: each evaluated checkpoint and the parent it is compared with. It reads every partition
  of what a child reads of its parent (``samples``, ``scores``, ``human_ratings``, ``judge_scores``: the panel's
  scores and the judge's identity); ``comparison``, ``length_bias`` and ``gates`` read their parent's rows through
  it. None of those is decided by the automation, so a re-decision does not move the lineage.

Both are unpartitioned and carry the automation condition of defs/automation.py, as does everything downstream of
them: when a checkpoint's judge scores or ratings change, Dagster itself marks the other checkpoints' decisions
stale and brings them up to date (docs/how-it-works.md, "Across checkpoints").
"""

from collections.abc import Callable

import dagster as dg
import pandas as pd

from eval_pipeline.agreement.compute import rater_sets
from eval_pipeline.agreement.plan import declares_protocol, inclusion, load_plan
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import CHECKPOINTS, Table
from eval_pipeline.defs.asset import asset_key, decision_asset
from eval_pipeline.defs.assets.decisions import commit
from eval_pipeline.defs.queries import samples_per_checkpoint
from eval_pipeline.defs.resources import WarehouseResource
from eval_pipeline.scoring.comparison import find_parent
from eval_pipeline.storage import versions
from eval_pipeline.storage.warehouse import Warehouse

POOL_COLUMNS = ["checkpoint_id", "sample_id", "judge_identity", "judge_label", "design", "inclusion", "tuned_on"]
LINEAGE_COLUMNS = ["checkpoint_id", "parent_id"]
ACTIVE, UNIFORM = "active", "uniform"  # calibration_pool.design: how the checkpoint's rated samples were drawn


def across(rubric: RubricConfig, *tables: str) -> list[dg.AssetDep]:
    """Dependencies on every checkpoint partition of these assets of the group."""
    return [dg.AssetDep(asset_key(rubric, t), partition_mapping=dg.AllPartitionMapping()) for t in tables]


def pool_rows(wh: Warehouse, rubric: RubricConfig, has_judge: bool, only: set[str] | None = None) -> pd.DataFrame:
    """One row per rated sample of every checkpoint: who judged its checkpoint (NULL before a judge recorded who it
    is) and how it came to be rated. ``design`` active: people rated by the active queue and ``inclusion`` is the
    sample's probability under it (NULL for a rated sample past the queue's first unrated one); uniform: ``inclusion``
    is the checkpoint's rated share (rated / samples). ``tuned_on``: the adopted alignment (core.config.alignment)
    whose judge judged the checkpoint and was tuned on (or shown) the sample: never in that judge's calibration set.
    ``only``: the rows of these checkpoints (each checkpoint's rows depend on its own data alone)."""
    empty = pd.DataFrame(columns=POOL_COLUMNS).astype({"inclusion": "float64", "tuned_on": "object"})
    if not wh.table_exists(rubric.name, Table.HUMAN_RATINGS) or (only is not None and not only):
        return empty
    mine = {"checkpoint_id": tuple(sorted(only))} if only is not None else None
    humans = rater_sets(rubric, wh.read(rubric.name, Table.HUMAN_RATINGS, where=mine))["human"]
    if humans.empty:
        return empty
    who: dict[str, tuple[str, str]] = {}
    aligned: set[str] = set()  # checkpoints the adopted aligned judge judged
    if has_judge and wh.table_exists(rubric.name, Table.JUDGE_IDENTITY):
        ids = wh.read(
            rubric.name,
            Table.JUDGE_IDENTITY,
            columns=("checkpoint_id", "judge_identity", "label", "prompt_version"),
            where=mine,
        )
        who = {str(r.checkpoint_id): (str(r.judge_identity), str(r.label)) for r in ids.itertuples()}
        if rubric.aligned:
            aligned = {str(r.checkpoint_id) for r in ids.itertuples() if r.prompt_version == rubric.judge_version}
    tuned = set(rubric.aligned.tuned_on) if rubric.aligned else set()
    active = has_judge and declares_protocol(rubric) and rubric.worklists.active
    sizes = samples_per_checkpoint(wh, rubric.name, sorted({str(c) for c in humans.checkpoint_id}))
    rows = []
    for ckpt, group in humans.groupby("checkpoint_id", sort=True):
        c = str(ckpt)
        rated = sorted({str(s) for s in group.sample_id})
        design = inclusion(load_plan(wh, rubric, c), set(rated)) if active else None
        identity, label = who.get(c, (None, None))
        if design:
            probs: dict[str, float | None] = {s: design.get(s) for s in rated}
            kind = ACTIVE
        else:
            share = len(rated) / max(sizes.get(c, 0), len(rated), 1)
            probs, kind = dict.fromkeys(rated, share), UNIFORM
        mark = rubric.aligned.id if rubric.aligned and c in aligned else None
        rows += [(c, s, identity, label, kind, p, mark if f"{c}/{s}" in tuned else None) for s, p in probs.items()]
    return pd.DataFrame(rows, columns=POOL_COLUMNS).astype({"inclusion": "float64", "tuned_on": "object"})


def lineage_rows(wh: Warehouse, rubric: RubricConfig) -> pd.DataFrame:
    """Each checkpoint the rubric scored (its ``scores`` rows' version recorded: storage.versions) and the parent it
    is compared with (scoring.comparison.find_parent over ``main.checkpoints``, read once). Checkpoints a warehouse of
    an earlier version holds get their versions recorded first (storage.versions.record_missing)."""
    versions.record_missing(wh, rubric.name)
    scored = sorted({c for (name, c), v in versions.read_versions(wh, rubric.name).items() if name == Table.SCORES})
    if not scored:
        return pd.DataFrame(columns=LINEAGE_COLUMNS)
    made = wh.read(*CHECKPOINTS) if wh.table_exists(*CHECKPOINTS) else None
    rows = [(c, find_parent(made, c) if made is not None else None) for c in scored]
    return pd.DataFrame(rows, columns=LINEAGE_COLUMNS).astype({"parent_id": "object"})


def _pool_metadata(df: pd.DataFrame) -> dict[str, dg.MetadataValue]:
    return {
        "rated_samples": dg.MetadataValue.int(len(df)),
        "checkpoints": dg.MetadataValue.int(int(df.checkpoint_id.nunique()) if len(df) else 0),
        "judge_identities": dg.MetadataValue.int(int(df.judge_identity.nunique()) if len(df) else 0),
    }


def _lineage_metadata(df: pd.DataFrame) -> dict[str, dg.MetadataValue]:
    edges = {r.checkpoint_id: r.parent_id for r in df.itertuples() if r.parent_id}
    return {"checkpoints": dg.MetadataValue.int(len(df)), "parents": dg.MetadataValue.json(edges)}


def _across_asset(
    rubric: RubricConfig,
    name: str,
    tables: list[str],
    description: str,
    rows: Callable[[Warehouse], tuple[pd.DataFrame, dict[str, str]]],
    metadata: Callable[[pd.DataFrame], dict[str, dg.MetadataValue]],
) -> dg.AssetsDefinition:
    """An unpartitioned asset of the group that reads every checkpoint partition of ``tables`` and writes the whole
    table ``name`` from ``rows`` (the table, and the fingerprints of the checkpoints whose rows it worked out again,
    stored with it), re-decided by the automation."""

    @decision_asset(
        rubric,
        name,
        across(rubric, *tables),
        description=description,
    )
    def pool(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        wh = warehouse.get()
        df, decided = rows(wh)
        commit(wh, rubric, {name: decided}, [(rubric.name, name, {}, [df])])  # the table and what it was made from
        # the content's version: what reads it follows a change of it, not a materialization (defs/automation.py)
        return dg.MaterializeResult(metadata=metadata(df), data_version=dg.DataVersion(versions.frame_version(df)))

    return pool


POOLED_FROM = (Table.HUMAN_RATINGS, Table.SAMPLES, Table.JUDGE_SCORES, Table.JUDGE_IDENTITY)


def pool_update(wh: Warehouse, rubric: RubricConfig, has_judge: bool) -> tuple[pd.DataFrame, dict[str, str]]:
    """The calibration pool, its rows worked out again only for the checkpoints whose ratings, samples, judge
    scores or judge changed since (their versions, storage.versions; the others' rows kept as they are), and the
    fingerprints of those checkpoints."""
    versions.record_missing(wh, rubric.name)  # checkpoints of a warehouse of an earlier version
    found = versions.read_versions(wh, rubric.name)
    decided = versions.read_decided(wh, rubric.name)
    rated = sorted({c for (name, c) in found if name == Table.HUMAN_RATINGS})
    fp = {
        c: versions.fingerprint(rubric.version, tuple(found.get((n, c), versions.ABSENT) for n in POOLED_FROM))
        for c in rated
    }
    todo = {c for c in rated if decided.get((Table.CALIBRATION_POOL, c)) != fp[c]}
    existing = (
        wh.read(rubric.name, Table.CALIBRATION_POOL) if wh.table_exists(rubric.name, Table.CALIBRATION_POOL) else None
    )
    if existing is None:
        todo = set(rated)
    keep = existing[existing.checkpoint_id.isin(set(rated) - todo)] if existing is not None else None
    fresh = pool_rows(wh, rubric, has_judge, only=todo)
    parts = [f for f in (keep, fresh) if f is not None and len(f)]
    df = pd.concat(parts, ignore_index=True) if parts else fresh
    df = df.sort_values(["checkpoint_id", "sample_id"], kind="stable").reset_index(drop=True)
    return df.astype({"inclusion": "float64", "tuned_on": "object"}), {c: fp[c] for c in sorted(todo)}


def calibration_pool_asset(rubric: RubricConfig, has_judge: bool) -> dg.AssetsDefinition:
    return _across_asset(
        rubric,
        Table.CALIBRATION_POOL,
        [Table.SAMPLES, Table.HUMAN_RATINGS] + ([Table.JUDGE_SCORES] if has_judge else []),
        "The judge's calibration set across every checkpoint: each rated sample, the judge identity that scored its "
        "checkpoint, and its chance of being rated (the active queue's inclusion probability, or the checkpoint's "
        "rated share). Every checkpoint's agreement and judge_trust pool it; it is brought up to date by Dagster's "
        "automation whenever any checkpoint's samples, judge scores or ratings change.",
        lambda wh: pool_update(wh, rubric, has_judge),
        _pool_metadata,
    )


def checkpoint_lineage_asset(rubric: RubricConfig, has_judge: bool) -> dg.AssetsDefinition:
    return _across_asset(
        rubric,
        Table.CHECKPOINT_LINEAGE,
        [Table.SAMPLES, Table.SCORES, Table.HUMAN_RATINGS] + ([Table.JUDGE_SCORES] if has_judge else []),
        "Every checkpoint this rubric scored and the parent it is compared with (the one its manifest names, else the "
        "one created just before it). Comparison, length bias and gates read their parent's rows through it, so a "
        "checkpoint's comparison is decided again when its parent is (re-)evaluated.",
        lambda wh: (lineage_rows(wh, rubric), {}),
        _lineage_metadata,
    )
