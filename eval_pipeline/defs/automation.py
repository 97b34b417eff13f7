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
deployment; ``eval-pipeline run`` needs none of it, its runs decide at their end. ``settling`` says, from the
instance, when a deployment has nothing more to decide.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dagster as dg

from eval_pipeline.core import settings
from eval_pipeline.defs.inflight import IN_FLIGHT

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

LIVE = [*IN_FLIGHT, dg.DagsterRunStatus.CANCELING]  # a run being cancelled can still write
DAEMON_ALIVE_S = 60.0  # the asset daemon's last heartbeat at most this old: it is running (it beats every ~30 s)


@dataclass(frozen=True)
class Settling:
    """Whether a deployment has settled and, when not, what it waits for (``waiting``, one line)."""

    waiting: str | None

    @property
    def settled(self) -> bool:
        return self.waiting is None


def settling(
    instance: dg.DagsterInstance,
    concerns: Callable[[dg.DagsterRun], bool] | None = None,
    sensor: str = SENSOR,
    now: float | None = None,
) -> Settling:
    """Settled is an event, read from the instance: no run is queued or in flight (of those ``concerns`` keeps,
    when given), and the automation sensor (``sensor``) has evaluated since the last run ended and requested
    nothing (a tick that started after that end, completed, skipped). Where nothing evaluates the sensor (no asset
    daemon beating, or the sensor stopped in the UI), nothing more will be launched by it, so no run in flight is
    settled. Never a count of quiet seconds."""
    now = time.time() if now is None else now
    live = [r for r in instance.get_runs(filters=dg.RunsFilter(statuses=LIVE)) if concerns is None or concerns(r)]
    if live:
        return Settling(f"run {live[0].run_id[:8]} is {live[0].status.value.lower()}")
    beat = instance.get_daemon_heartbeats().get("ASSET")
    if beat is None or now - beat.timestamp > DAEMON_ALIVE_S:
        return Settling(None)  # no daemon evaluates the automation: nothing launches after the runs
    state = next((st for st in instance.all_instigator_state() if st.instigator_name == sensor), None)
    if state is not None and state.status.value == "STOPPED":
        return Settling(None)
    if state is None:
        return Settling(f"the automation sensor {sensor} has not evaluated yet")
    ended = _last_changed(instance)
    last_end = ended.update_timestamp.timestamp() if ended is not None else 0.0
    ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, after=last_end, limit=20)
    done = [t for t in ticks if t.is_completed and t.timestamp > last_end]
    if not done:
        return Settling(f"the automation sensor {sensor} has not evaluated since the last run ended")
    latest = max(done, key=lambda t: t.timestamp)
    if latest.status.value == "SKIPPED" or (latest.status.value == "SUCCESS" and not latest.run_ids):
        return Settling(None)
    return Settling(f"the automation sensor {sensor} requested runs ({latest.status.value.lower()})")


def _last_changed(instance: dg.DagsterInstance) -> dg.RunRecord | None:
    """The run whose record changed last (it started, ended, ...), or None."""
    records = instance.get_run_records(limit=1, order_by="update_timestamp", ascending=False)
    return records[0] if records else None


def runs_mark(instance: dg.DagsterInstance) -> str:
    """The run that changed last (its id, status and when): what a run writes can have moved only when this did.
    A sensor whose answer is read from what runs wrote keeps it in its cursor and does not look again (no
    warehouse opened) while it and the sensor's other inputs are unchanged."""
    r = _last_changed(instance)
    if r is None:
        return "no run"
    return f"{r.dagster_run.run_id}:{r.dagster_run.status.value}:{r.update_timestamp.timestamp()}"


def redecide_sensor(minimum_interval_seconds: int = 15) -> dg.AutomationConditionSensorDefinition:
    """The automation sensor that evaluates REDECIDE in a deployment (the daemon runs it)."""
    return dg.AutomationConditionSensorDefinition(
        SENSOR,
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=settings.sensor_interval_seconds(minimum_interval_seconds),
        description="Decides agreement, judge trust, comparisons, gates and verdicts again, for every checkpoint at "
        "once, when what they read changed (a partition materialized outside a checkpoint's run, ratings read "
        "again): no judge call.",
    )
