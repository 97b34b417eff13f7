"""The project's event log storage (deploy/dagster.yaml): Dagster's SQLite files, connections kept open."""

import shutil
import threading
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.dagster_run import DagsterRun
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from eval_pipeline.runtime.event_log import EventLogStorage

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A DAGSTER_HOME with the instance the project deploys."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    shutil.copy(ROOT / "deploy/dagster.yaml", tmp_path / "dagster.yaml")
    return tmp_path


def _instance(home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(home))


@pytest.mark.slow
def test_the_deployed_instance_uses_it_and_dagster_reads_what_it_wrote(home):
    instance = _instance(home)
    assert isinstance(instance.event_log_storage, EventLogStorage)

    @dg.asset(partitions_def=dg.DynamicPartitionsDefinition(name="ckpt"))
    def thing(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        context.log.info("made")
        return dg.MaterializeResult(metadata={"n": 3})

    instance.add_dynamic_partitions("ckpt", ["a", "b"])
    for key in ("a", "b", "a"):
        assert dg.materialize([thing], instance=instance, partition_key=key).success
    # a finished run is one file: its write-ahead log went into <run>.db when the run ended
    files = sorted(p.name for p in (home / "history" / "runs").iterdir() if not p.name.startswith("index."))
    assert [f.rsplit(".", 1)[1] for f in files] == ["db"] * 3, files
    # Dagster's own class on the same files (a rollback to the default) sees every event and materialization
    plain = SqliteEventLogStorage(str(home / "history" / "runs"))
    runs = instance.get_runs()
    assert len(runs) == 3
    for run in runs:
        ours = [e.dagster_event_type for e in instance.all_logs(run.run_id) if e.dagster_event]
        theirs = [e.dagster_event_type for e in plain.get_logs_for_run(run.run_id) if e.dagster_event]
        assert ours == theirs and dg.DagsterEventType.ASSET_MATERIALIZATION in ours
    record = plain.get_latest_materialization_events([dg.AssetKey("thing")])[dg.AssetKey("thing")]
    assert record is not None and record.dagster_event.partition == "a"
    assert instance.get_materialized_partitions(dg.AssetKey("thing")) == {"a", "b"}
    # no commit waits on a sync of its own (a run's shard is synced at the checkpoint after each statement: the
    # watcher's test below sees each event in the file)
    with instance.event_log_storage.index_connection() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL


def test_a_watcher_sees_each_event_as_it_is_written(home):
    """The webserver streams a running run's events by watching the run's database: a write through a kept
    connection, which may stay in the run's write-ahead log for a while, still wakes the watcher (fails with
    Dagster's watcher, which wakes on <run>.db alone)."""
    writer, reader = _instance(home), _instance(home)
    run = writer.add_run(DagsterRun(job_name="watched", run_id=str(uuid.uuid4())))
    writer.report_engine_event("first", run)  # the run's database exists before the watch starts
    seen: list[str] = []
    got = threading.Event()

    def callback(entry, cursor):  # noqa: ANN001 - Dagster's callback signature
        seen.append(entry.message)
        if "third" in entry.message:
            got.set()

    reader.event_log_storage.watch(run.run_id, None, callback)
    try:
        for text in ("second", "third"):
            time.sleep(0.3)
            writer.report_engine_event(text, run)
        assert got.wait(10), f"the watcher saw only {seen}"
    finally:
        reader.event_log_storage.end_watch(run.run_id, callback)
        reader.event_log_storage.dispose()
    assert [m for m in seen if m in ("first", "second", "third")][-2:] == ["second", "third"]


def test_a_deleted_run_database_is_made_again(home):
    instance = _instance(home)
    run = instance.add_run(DagsterRun(job_name="gone", run_id=str(uuid.uuid4())))
    instance.report_engine_event("before", run)
    instance.event_log_storage.wipe()
    instance.report_engine_event("after", run)
    assert [e.message for e in instance.all_logs(run.run_id)] == ["after"]


def test_an_instance_written_before_the_runtime_room_opens_with_its_paths_moved(tmp_path, monkeypatch):
    """#76: a DAGSTER_HOME whose dagster.yaml names eval_pipeline.defs.event_log (where the event log lived before
    runtime/) opens, its file rewritten to the module's new path; the rest of the file is kept as it was."""
    from eval_pipeline.runtime.instance import instance_yaml, open_instance

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    old = instance_yaml("data/warehouse.duckdb").replace("eval_pipeline.runtime.", "eval_pipeline.defs.")
    assert "eval_pipeline.defs.event_log" in old
    (home / "dagster.yaml").write_text(old + "# a person's own note\n")
    instance = open_instance(home, "data/warehouse.duckdb")
    assert type(instance.event_log_storage).__module__ == "eval_pipeline.runtime.event_log"
    text = (home / "dagster.yaml").read_text()
    assert "eval_pipeline.defs." not in text and text.endswith("# a person's own note\n")
    instance.dispose()
