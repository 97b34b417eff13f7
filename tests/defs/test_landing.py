"""#70: landing the k-th checkpoint costs what landing the first did, and a history ends at the same tables whichever
path landed it.

The history (eval_pipeline.devtools.history): 8 kg_qa checkpoints, each the parent of the next, ratings on every
other one; after the 4th lands, one rating file changes (h-0002's evaluators renamed: a changed file of the same
rows), then the other 4 land. Paths: `eval-pipeline run` of each half at once (the reference: ⌈N / chunk⌉ runs),
`run` one checkpoint at a time, and the deployment's sensors one tick at a time (the checkpoint sensor's run for
each new folder, the ratings sensor's for the changed file, the automation sensor after each) — Dagster's own
evaluation of the sensors and conditions, each request launched as a run, nothing of the project's runner. The UI's
partition backfill is proved by tests/defs/test_daemon_settles.py (a real webserver and daemon)."""

from __future__ import annotations

import warnings
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.devtools.history import checkpoint_id, write_history, write_ratings
from eval_pipeline.runtime.runner import materialize_checkpoints
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR
from tests.helpers.automation import AutomationSensor, assets_of
from tests.helpers.lakes import contents, differences

RUBRIC = "kg_qa"
HALF, N = 4, 8  # the same paths and the same mid-history rating change as a longer history (12 until 2026-12-05)


class History:
    """One history's folders, lake and definitions."""

    def __init__(self, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root, self.ratings = base / "checkpoints", base / "ratings"
        self.ratings.mkdir(parents=True)
        self.lake = f"ducklake:sqlite:{base / 'lake' / 'catalog.sqlite'}"
        monkeypatch.setenv("EVAL_RATINGS_DIR", str(self.ratings))
        monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(self.root))
        self.defs = build_definitions(RUBRIC_DIR, self.lake, str(self.root))

    def write(self, first: int, last: int) -> list[str]:
        return write_history(self.root, self.ratings, last, [RUBRIC], start=first)

    def change_a_rating_file(self) -> None:
        write_ratings(self.ratings, 2, [RUBRIC], evaluator_suffix="-b")

    def tables(self) -> dict:
        found = contents(Warehouse(self.lake))
        return {t: df.drop(columns=["path"]) if t == "main.checkpoints" else df for t, df in found.items()}


def _runs(instance: dg.DagsterInstance) -> int:
    return len(instance.get_run_records())


def _cli(history: History, instance: dg.DagsterInstance, ids: list[str]) -> None:
    outcomes = materialize_checkpoints(history.defs, instance, ids, {RUBRIC}, log_level="ERROR")
    assert outcomes and all(o.success for o in outcomes), [o.failures for o in outcomes]


def by_the_cli_at_once(history: History, instance: dg.DagsterInstance) -> None:
    _cli(history, instance, history.write(1, HALF))
    assert _runs(instance) == 1  # four checkpoints: one run (EVAL_BACKFILL_CHUNK 50)
    history.change_a_rating_file()
    _cli(history, instance, history.write(HALF + 1, N))
    assert _runs(instance) == 3  # h-0002's ratings read again (one run, the decisions with it), then four: one


def by_the_cli_one_at_a_time(history: History, instance: dg.DagsterInstance) -> None:
    for i in range(1, N + 1):
        if i == HALF + 1:
            history.change_a_rating_file()
        history.write(i, i)
        _cli(history, instance, [checkpoint_id(i)])


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance, name: str) -> int:
    """One tick of a sensor of the deployment, as the daemon makes it: its partitions added, its runs launched."""
    sensor = defs.resolve_sensor_def(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = sensor(dg.build_sensor_context(instance=instance, definitions=defs))
    if not isinstance(result, dg.SensorResult):
        return 0
    for req in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    checks = defs.asset_checks or []
    for req in result.run_requests or []:
        keys = req.asset_selection or []
        selection = dg.AssetSelection.assets(*keys).without_checks()
        done = dg.materialize(
            [*assets_of(defs), *checks], instance=instance, partition_key=req.partition_key,
            resources=defs.resources, selection=selection, tags=dict(req.tags), raise_on_error=True,
        )  # fmt: skip
        assert done.success
    return len(result.run_requests or [])


def by_the_sensors(history: History, instance: dg.DagsterInstance) -> None:
    automation = AutomationSensor(history.defs, instance)
    for i in range(1, N + 1):
        if i == HALF + 1:
            history.change_a_rating_file()
            assert _tick(history.defs, instance, "ratings_sensor") == 1  # h-0002 alone
            automation.settle()
        history.write(i, i)
        assert _tick(history.defs, instance, "checkpoint_sensor") == 1
        automation.settle()
    assert automation.runs <= 1, automation.keys  # the checkpoints' own runs left nothing stale, but the re-read


PATHS = {"one at a time": by_the_cli_one_at_a_time, "the sensors": by_the_sensors}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        history = History(tmp_path_factory.mktemp("at_once"), mp)
        with dg.instance_for_test() as instance:
            by_the_cli_at_once(history, instance)
        return history.tables()
    finally:
        mp.undo()


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", list(PATHS))
def test_a_history_ends_at_the_same_tables_whichever_path_landed_it(tmp_path, monkeypatch, reference, path):
    """One at a time, every run ends by merging the lake's small files (the upkeep's bar lowered to one file a
    table): the runs say so, and the tables are the reference's all the same."""
    from eval_pipeline.storage.backends import lake

    if path == "one at a time":
        monkeypatch.setattr(lake, "UPKEEP_FILES_PER_TABLE", 1)
    history = History(tmp_path, monkeypatch)
    with dg.instance_for_test() as instance:
        PATHS[path](history, instance)
        records = instance.fetch_materializations(dg.AssetKey([RUBRIC, "verdict"]), limit=100).records
        merged = [r for r in records if "warehouse_upkeep" in r.asset_materialization.metadata]
    if path == "one at a time":
        assert len(merged) >= N - 1, [sorted(r.asset_materialization.metadata) for r in records]
    assert differences(history.tables(), reference) == []
    verdicts = reference["kg_qa.verdict"]
    assert len(verdicts) == N and set(verdicts.pool_version) - {"", "0:0"}  # each names the pool it was decided on


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_tenth_landing_costs_one_run_and_decides_again_only_what_it_changed(tmp_path, monkeypatch):
    """Nine checkpoints landed at once; the tenth (with ratings) lands in one run; the eleventh (without) lands in one
    run and leaves every other checkpoint's decisions as they were; a re-read of unchanged ratings asks for
    nothing, and the automation, after each landing, requests nothing."""
    history = History(tmp_path, monkeypatch)
    wh = Warehouse(history.lake)
    with dg.instance_for_test() as instance:
        _cli(history, instance, history.write(1, 9))
        automation = AutomationSensor(history.defs, instance)
        before = _runs(instance)
        _cli(history, instance, history.write(10, 10))
        assert _runs(instance) - before == 1  # rated: the judge's pooled verdict moved, every checkpoint's with it
        assert automation.tick() == 0, automation.keys
        decided = wh.read("main", "decision_inputs")
        verdicts = wh.read(RUBRIC, "verdict", columns=("checkpoint_id", "run_id"))
        before = _runs(instance)
        _cli(history, instance, history.write(11, 11))  # no ratings
        assert _runs(instance) - before == 1
        assert automation.tick() == 0, automation.keys
        after = wh.read("main", "decision_inputs")
        # the ranking (#74) is one decision across every checkpoint, made again whole when one lands ("k of K"
        # moves for all): one fingerprint for all of them; every other decision of the others is as it was
        ranked = after[after.asset == "ranks"]
        assert len(ranked) == 11 and ranked.fingerprint.nunique() == 1
        others = lambda df: df[(df.checkpoint_id != checkpoint_id(11)) & (df.asset != "ranks")].sort_values(  # noqa: E731
            ["asset", "checkpoint_id"]
        )
        assert others(after).reset_index(drop=True).equals(others(decided).reset_index(drop=True))
        again = wh.read(RUBRIC, "verdict", columns=("checkpoint_id", "run_id"))
        kept = again[again.checkpoint_id != checkpoint_id(11)].merge(verdicts, on="checkpoint_id")
        assert (kept.run_id_x == kept.run_id_y).all()  # the other ten verdicts: not decided again
        # the parent h-0010 and its child: only the child's comparison is new
        assert set(after[after.checkpoint_id == checkpoint_id(11)].asset) >= {"comparison", "gates", "verdict"}
        # the ratings files read again unchanged: nothing stale, nothing to run
        from eval_pipeline.defs.ratings_sensor import stale_ratings
        from eval_pipeline.defs.resources import RatingsSource

        registered = set(instance.get_dynamic_partitions("checkpoints"))
        assert stale_ratings(wh, [RUBRIC], RatingsSource().folder(), registered) == {}
        read = dg.AssetKey([RUBRIC, "human_ratings"])
        # h-0010's ratings read again, as the UI's "Materialize" does: the same content, the same data version (a
        # checkpoint run in a range of them carries the range's: its first re-read alone counts as a change)
        dg.materialize(
            [*assets_of(history.defs)], instance=instance, partition_key=checkpoint_id(10),
            resources=history.defs.resources, selection=dg.AssetSelection.assets(read),
        )  # fmt: skip
        assert automation.tick() == 0, automation.keys
        history.change_a_rating_file()
        assert set(stale_ratings(wh, [RUBRIC], RatingsSource().folder(), registered)[RUBRIC][1]) == {checkpoint_id(2)}
    wh.close()
