"""How Dagster decides, by itself, that decisions across checkpoints are stale: the automation condition of the
unpartitioned assets over every checkpoint — the pools (defs/assets/pools.py) and the decisions that read them
(agreement and judge trust, comparison, length bias, gates, verdict: defs/assets/decisions.py).

A checkpoint's run materializes them after its partition, so after a run nothing is stale; the automation brings
them up to date when something else changed what they read: a partition materialized on its own (the UI, the
ratings sensor, a judge batch that finished). ``REDECIDE`` is Dagster's ``eager()`` changed in three ways:

- it follows a dependency's *data version*, not its materialization: the pool and the lineage carry the version of
  their content, and every partition the version of its rows (defs/asset.py), so re-reading unchanged ratings or
  re-materializing an unchanged pool requests nothing;
- "handled" is the target's own update only (a timed condition), so when one run updated a decision and a later
  run what it reads, the order of the two decides (eager's ``newly_requested | newly_updated`` carries no time);
- a target whose last run failed is not asked again until it succeeds (eager's ``newly_requested`` reset did that).

Every target is unpartitioned, so one request decides every checkpoint whose inputs changed, in one run. It never
targets an asset that calls the judge. The automation sensor (``redecide_sensor``, defs/build.py) evaluates it in a
deployment; ``eval-pipeline run`` evaluates it itself after its runs (defs/runner.py) and launches what it requests.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

AC = dg.AutomationCondition

_deps_changed = AC.any_deps_match(AC.data_version_changed()).with_label("what it reads changed")

REDECIDE: dg.AutomationCondition[Any] = (
    (_deps_changed.since(AC.newly_updated()) | AC.any_deps_match(AC.will_be_requested()))
    & ~AC.any_deps_missing()
    & ~AC.any_deps_in_progress()
    & ~AC.in_progress()
    & ~AC.execution_failed()
).with_label("decide again when what it reads changed")

SENSOR = "redecide_sensor"


def redecide_sensor(minimum_interval_seconds: int = 15) -> dg.AutomationConditionSensorDefinition:
    """The automation sensor that evaluates REDECIDE in a deployment (the daemon runs it)."""
    return dg.AutomationConditionSensorDefinition(
        SENSOR,
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=minimum_interval_seconds,
        description="Decides agreement, judge trust, comparisons, gates and verdicts again, for every checkpoint at "
        "once, when what they read changed (a partition materialized outside a checkpoint's run, ratings read "
        "again): no judge call.",
    )
