"""How Dagster decides, by itself, that a checkpoint's decisions are stale: the automation condition of the assets
that pool across checkpoints (defs/assets/pools.py) and of everything downstream of them.

``REDECIDE`` is Dagster's ``eager()`` changed in two ways, both because the pools are unpartitioned assets that a
checkpoint's own run materializes beside its partition:

- "handled" is the target's own update only (a timed condition), so when one run updated a checkpoint's
  ``agreement`` and a later run the pool it reads, the order of the two decides, not whether both fell between two
  evaluations (eager's ``newly_requested | newly_updated`` carries no time, and the older update would win);
- a target whose last run failed is not asked again until it succeeds (eager's ``newly_requested`` reset did that).

It never targets an asset that calls the judge: only the pools and what reads them (agreement, comparison, length
bias, gates, verdict, worklists), so bringing a checkpoint up to date costs no judge call. The automation sensor
(``redecide_sensor``, defs/build.py) evaluates it in a deployment; ``eval-pipeline run`` evaluates it itself between
its runs (defs/runner.py), and launches what it requests.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

AC = dg.AutomationCondition

_deps_updated = AC.any_deps_match(AC.newly_updated()).with_label("a dependency updated")

REDECIDE: dg.AutomationCondition[Any] = (
    (_deps_updated.since(AC.newly_updated()) | AC.any_deps_match(AC.will_be_requested()))
    & ~AC.any_deps_missing()
    & ~AC.any_deps_in_progress()
    & ~AC.in_progress()
    & ~AC.execution_failed()
).with_label("decide again when what it reads changed")

# The gate checks: asked with the gates (when they will be requested, or were updated), and handled once asked.
# A check's own update carries no time and Dagster does not count every check evaluation as one (a check shown on
# judge_scores, whose target the re-decision never materializes, was asked again on every tick with REDECIDE's
# reset), so the reset is eager's: requested or updated.
RECHECK: dg.AutomationCondition[Any] = (
    (_deps_updated.since_last_handled() | AC.any_deps_match(AC.will_be_requested())) & ~AC.in_progress()
).with_label("checked again with the gates")

SENSOR = "redecide_sensor"


def redecide_sensor(minimum_interval_seconds: int = 15) -> dg.AutomationConditionSensorDefinition:
    """The automation sensor that evaluates REDECIDE in a deployment (the daemon runs it)."""
    return dg.AutomationConditionSensorDefinition(
        SENSOR,
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=minimum_interval_seconds,
        description="Decides a checkpoint's agreement, judge trust, comparison, gates and verdict again when the "
        "calibration pool or the checkpoint lineage they read changed (another checkpoint judged, ratings read "
        "again): no judge call.",
    )
