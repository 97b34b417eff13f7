"""The daemon's automation sensor, tick by tick, for tests that run no daemon: Dagster's own evaluation of the
graph's automation conditions (``dg.evaluate_automation_conditions``, with the sensor's cursor), each request
launched as a run, the assets over every checkpoint first. Nothing of the project's runner, so a test can hold
the runner's result against it."""

from __future__ import annotations

import warnings

import dagster as dg

from eval_pipeline.runtime.dagster_private import dynamic_partitions_read_once  # evaluations in seconds, not minutes


def assets_of(defs: dg.Definitions) -> list[dg.AssetsDefinition]:
    return [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]


def partition_run(
    defs: dg.Definitions, instance: dg.DagsterInstance, partition: str | None, selection: dg.AssetSelection
) -> None:
    """One run of ``selection`` (with the checks on it) for one partition, or unpartitioned (None), as
    `dagster asset materialize` or the UI's "Materialize" runs it."""
    result = dg.materialize(
        [*assets_of(defs), *(defs.asset_checks or [])],
        instance=instance,
        partition_key=partition,
        resources=defs.resources,
        selection=selection,
        raise_on_error=True,
    )
    assert result.success


class AutomationSensor:
    """Armed when made (the sensor's first tick requests nothing); ``tick`` launches what the conditions request,
    ``settle`` ticks until they request nothing. ``runs`` counts the runs, ``keys`` lists what they materialized."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
        self.defs, self.instance = defs, instance
        self.cursor: object = None
        self.runs = 0
        self.keys: list[str] = []
        self.tick()

    def tick(self) -> int:
        with warnings.catch_warnings(), dynamic_partitions_read_once(self.instance):
            warnings.simplefilter("ignore")
            result = dg.evaluate_automation_conditions(self.defs, self.instance, cursor=self.cursor)  # type: ignore[arg-type]
        self.cursor = result.cursor
        by_partition: dict[str | None, list[dg.AssetKey]] = {}
        for asset in assets_of(self.defs):
            for key in asset.keys:
                for p in result.get_requested_partitions(key):
                    by_partition.setdefault(p, []).append(key)
        for p in sorted(by_partition, key=lambda p: (p is not None, p or "")):
            partition_run(self.defs, self.instance, p, dg.AssetSelection.assets(*by_partition[p]))
            self.runs += 1
            self.keys += ["/".join(k.path) for k in by_partition[p]]
        return len(by_partition)

    def settle(self, ticks: int = 10) -> None:
        for _ in range(ticks):
            if not self.tick():
                return
        raise AssertionError(f"the automation did not settle in {ticks} ticks")
