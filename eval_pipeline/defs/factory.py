"""One factory turns each rubric config into its own Dagster asset group, as a ``dg.Definitions``.

The group is named after the rubric; every asset key is ``[<rubric>, <asset>]`` and writes
the table ``<rubric>.<asset>``; every asset carries the rubric's config hash as code version (defs/asset.py).
What a checkpoint computes from its own rows is partitioned by checkpoint; what spans checkpoints — the pool, the
lineage and the decisions that read them (agreement and trust, comparison, length bias, gates, verdict) — is
unpartitioned and decided for every checkpoint at once (defs/assets/decisions.py). Nothing here names a rubric: what a
group contains follows from its config (judged dimensions, extraction, metrics, examples,
gates). The assets are listed in the order of the flow.
"""

from __future__ import annotations

import dagster as dg

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.defs.asset import asset_key
from eval_pipeline.defs.assets.agreement import agreement_asset, length_bias_asset
from eval_pipeline.defs.assets.align import align_job, judge_alignment_asset
from eval_pipeline.defs.assets.ingest import human_ratings_asset, raw_outputs_asset, samples_asset
from eval_pipeline.defs.assets.judge import (
    extractions_asset,
    judge_calibration_asset,
    judge_repeatability_asset,
    judge_scores_asset,
)
from eval_pipeline.defs.assets.metrics import metrics_asset
from eval_pipeline.defs.assets.pools import calibration_pool_asset, checkpoint_lineage_asset
from eval_pipeline.defs.assets.publish import worklists_asset
from eval_pipeline.defs.assets.ranks import ranks_asset
from eval_pipeline.defs.assets.scoring import comparison_asset, gate_tables, gates_asset, scores_asset, summary_asset
from eval_pipeline.defs.assets.verdict import verdict_asset
from eval_pipeline.defs.checks import gate_checks, gate_evaluations, judge_completeness_check

# the report drawn after the gates reads these, so the gates come after them whatever the gate kinds read
REPORTED_BEFORE_GATES = ("agreement", "comparison", "judge_calibration", "length_bias", "judge_repeatability")


def rubric_definitions(rubric: RubricConfig) -> dg.Definitions:
    """All assets and checks of one rubric's group, derived from its config alone."""
    has_judge = bool(rubric.judged_dimensions or rubric.questionnaire)
    assets: list[dg.AssetsDefinition] = [raw_outputs_asset(rubric), samples_asset(rubric)]
    if has_judge:
        assets.append(judge_scores_asset(rubric))
    if rubric.extraction:
        assets.append(extractions_asset(rubric))
    if rubric.metrics:
        assets.append(metrics_asset(rubric))
    assets += [scores_asset(rubric, has_judge, bool(rubric.metrics)), summary_asset(rubric)]
    assets += [
        human_ratings_asset(rubric),
        calibration_pool_asset(rubric, has_judge),
        agreement_asset(rubric, has_judge),
    ]
    assets += [checkpoint_lineage_asset(rubric, has_judge), comparison_asset(rubric), ranks_asset(rubric, has_judge)]
    if has_judge:
        assets.append(length_bias_asset(rubric))
    if has_judge and rubric.repeat:
        assets.append(judge_repeatability_asset(rubric))
    if has_judge and rubric.examples:
        assets.append(judge_calibration_asset(rubric))
    assets.append(worklists_asset(rubric))
    checks: list[dg.AssetChecksDefinition] = [judge_completeness_check(rubric)] if has_judge else []
    if rubric.gates:
        names = {key.path[-1] for a in assets for key in a.keys}
        upstream = sorted(set(gate_tables(rubric)) | set(REPORTED_BEFORE_GATES))
        reported = gate_evaluations(rubric, names)
        assets.append(gates_asset(rubric, [asset_key(rubric, t) for t in upstream if t in names], reported))
        checks.append(gate_checks(rubric, names))
    decided_from = sorted(key for a in assets for key in a.keys if key.path[-1] != "worklists")
    across = {key.path[-1] for a in assets for key in a.keys if a.partitions_def is None}
    assets.append(verdict_asset(rubric, decided_from, across))
    jobs = []
    if has_judge:  # on demand, after the verdict: nothing of an evaluation reads it
        assets.append(judge_alignment_asset(rubric))
        jobs.append(align_job(rubric))
    return dg.Definitions(assets=assets, asset_checks=checks, jobs=jobs)
