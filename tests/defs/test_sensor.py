import dagster as dg
import pytest

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.defs.partitions import CHECKPOINTS
from tests.conftest import RUBRIC_DIR, write_checkpoint

ROW = {"sample_id": "s1", "user_statement": "I feel low.", "response": "That sounds hard."}


def _evaluate(defs: dg.Definitions, instance: dg.DagsterInstance):
    sensor = defs.resolve_sensor_def("checkpoint_sensor")
    ctx = dg.build_sensor_context(instance=instance, definitions=defs)
    return sensor(ctx)


def _apply(result, instance):
    for req in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))


def test_complete_folders_become_partitions_and_runs(tmp_path, instance):
    root = tmp_path / "ckpts"
    write_checkpoint(
        root,
        "ckpt-a",
        {"empathetic_dialogue": [ROW], "kg_qa": ["{}"]},
        manifest={"model": "m-1", "created_at": "2026-10-01T00:00:00Z", "parent": None},
    )
    write_checkpoint(root, "ckpt-b", {"empathetic_dialogue": [ROW]}, complete=False)  # half-written
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(root))
    result = _evaluate(defs, instance)
    assert isinstance(result, dg.SensorResult)
    assert [r.partition_key for r in result.run_requests] == ["ckpt-a"]
    req = result.run_requests[0]
    groups = {k.path[0] for k in req.asset_selection}
    assert groups == {"empathetic_dialogue", "kg_qa"}  # only the rubrics it has files for
    assert {k.path[1] for k in req.asset_selection} >= {"raw_outputs", "samples"}
    assert req.tags["eval/checkpoint"] == "ckpt-a" and req.tags["eval/model"] == "m-1"
    assert list(result.dynamic_partitions_requests[0].partition_keys) == ["ckpt-a"]

    # seen again: nothing new is requested
    _apply(result, instance)
    again = _evaluate(defs, instance)
    assert isinstance(again, dg.SkipReason)
    assert "1 still being written" in again.skip_message

    # the half-written folder completes: it is picked up alone
    (root / "ckpt-b" / "checkpoint.json").write_text(
        '{"model": "m-1", "created_at": "2026-10-02T00:00:00Z", "parent": "ckpt-a"}'
    )
    third = _evaluate(defs, instance)
    assert [r.partition_key for r in third.run_requests] == ["ckpt-b"]
    _apply(third, instance)
    assert sorted(instance.get_dynamic_partitions(CHECKPOINTS.name)) == ["ckpt-a", "ckpt-b"]


def test_unsafe_ids_and_bad_manifests_are_refused(tmp_path, instance):
    root = tmp_path / "ckpts"
    for bad in ["bad'id", "with space", "semi;colon", ".hidden", "tab\tid"]:
        write_checkpoint(root, bad, {"empathetic_dialogue": [ROW]})
    broken = write_checkpoint(root, "ckpt-broken", {"empathetic_dialogue": [ROW]})
    (broken / "checkpoint.json").write_text("{not json")
    nomodel = write_checkpoint(root, "ckpt-nomodel", {"empathetic_dialogue": [ROW]})
    (nomodel / "checkpoint.json").write_text('{"created_at": "2026-10-01T00:00:00Z"}')
    badparent = write_checkpoint(
        root,
        "ckpt-badparent",
        {"empathetic_dialogue": [ROW]},
        manifest={"model": "m", "created_at": "2026-10-01T00:00:00Z", "parent": "../etc"},
    )
    assert badparent.exists()
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(root))
    result = _evaluate(defs, instance)
    assert isinstance(result, dg.SkipReason)
    assert "8 refused" in result.skip_message
    assert instance.get_dynamic_partitions(CHECKPOINTS.name) == []


def test_folder_with_only_unknown_rubric_files_is_not_registered(tmp_path, instance):
    root = tmp_path / "ckpts"
    write_checkpoint(root, "ckpt-x", {"not_a_rubric": [ROW]})
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(root))
    result = _evaluate(defs, instance)
    assert isinstance(result, dg.SkipReason)


@pytest.mark.slow
def test_the_report_is_redrawn_once_after_each_run_the_daemon_sees_end(tmp_path, instance, monkeypatch):
    """Runs launched from the UI, a backfill or the checkpoint sensor: a run-status sensor redraws the report
    (it covers every rubric and checkpoint, so it is drawn once a run, never in a step)."""
    from eval_pipeline.runtime.runner import materialize_checkpoints

    root = tmp_path / "ckpts"
    rows = [{**ROW, "sample_id": f"s{i}"} for i in range(3)]
    write_checkpoint(root, "ckpt-a", {"empathetic_dialogue": rows})
    monkeypatch.setenv("EVAL_REPORT_DIR", str(tmp_path / "in_process"))
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(root))
    (outcome,) = materialize_checkpoints(defs, instance, ["ckpt-a"], log_level="ERROR")
    assert outcome.report == tmp_path / "in_process" / "report.html" and outcome.report.exists()  # in-process

    monkeypatch.setenv("EVAL_REPORT_DIR", str(tmp_path / "daemon"))
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(root))
    run = instance.get_run_by_id(outcome.run_id)
    (event,) = [e.dagster_event for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_SUCCESS)]
    sensor = defs.resolve_sensor_def("report_after_success")
    ctx = dg.build_run_status_sensor_context(
        sensor_name="report_after_success", dagster_instance=instance, dagster_run=run, dagster_event=event
    )
    sensor(ctx)
    html = (tmp_path / "daemon" / "report.html").read_text()
    assert "empathetic_dialogue" in html and "ckpt-a" in html
    assert {s.name for s in defs.sensors} >= {"report_after_success", "report_after_failure"}


def test_a_checkpoint_the_cli_claimed_or_ran_is_not_run_again_by_the_sensor(tmp_path, instance, monkeypatch):
    """#34.6: with `make ui` running, `eval-pipeline run --checkpoint X` and the sensor both evaluated X."""
    from eval_pipeline.runtime.runs import in_flight_elsewhere

    root = tmp_path / "ckpts"
    write_checkpoint(root, "ckpt-a", {"empathetic_dialogue": [ROW]})
    write_checkpoint(root, "ckpt-b", {"empathetic_dialogue": [ROW]})
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(root))
    # a run of ckpt-b exists (launched by the CLI or a person) before the sensor first sees the folder
    run = instance.create_run_for_job(
        dg.Definitions(jobs=[dg.JobDefinition(graph_def=dg.GraphDefinition(name="g"), name="j")]).resolve_job_def("j"),
        tags={"eval/checkpoint": "ckpt-b", "eval/pid": "1", "eval/host": "elsewhere"},
    )
    result = _evaluate(defs, instance)
    assert [r.partition_key for r in result.run_requests] == ["ckpt-a"]
    assert sorted(result.dynamic_partitions_requests[0].partition_keys) == ["ckpt-a", "ckpt-b"]
    # the CLI sees a run of ckpt-b in flight in another process, and leaves it alone
    assert in_flight_elsewhere(instance, "ckpt-b") == run.run_id
    assert in_flight_elsewhere(instance, "ckpt-a") is None
    assert in_flight_elsewhere(instance, "ckpt-b", {"kg_qa"}) == run.run_id  # a run that names no rubric: any
    # a run of other rubric groups of a checkpoint is not in the way of a command for its others
    job = dg.Definitions(jobs=[dg.JobDefinition(graph_def=dg.GraphDefinition(name="g"), name="j")]).resolve_job_def("j")
    other = instance.create_run_for_job(
        job, tags={"eval/checkpoint": "ckpt-a", "eval/rubrics": "kg_qa,npc_dialogue", "eval/pid": "1"}
    )
    assert in_flight_elsewhere(instance, "ckpt-a", {"empathetic_dialogue"}) is None
    assert in_flight_elsewhere(instance, "ckpt-a", {"npc_dialogue", "empathetic_dialogue"}) == other.run_id
    assert in_flight_elsewhere(instance, "ckpt-a") == other.run_id


def test_the_ratings_and_batch_sensors_look_again_only_when_a_file_or_a_run_changed(tmp_path, instance, monkeypatch):
    """An idle daemon asks its sensors every few seconds: the ratings sensor (and the judge-batch sensor, with no
    batch open) does not open the warehouse while no rating file, registered checkpoint or run changed since its
    last look; a rating written, or a run that ended, makes it look again."""
    import os
    import shutil
    import time

    from eval_pipeline.defs import batch_sensor, ratings_sensor
    from tests.conftest import ROOT

    ratings = tmp_path / "ratings"
    shutil.copytree(ROOT / "data" / "human_ratings" / "kg_qa", ratings / "kg_qa")
    monkeypatch.setenv("EVAL_RATINGS_DIR", str(ratings))
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(tmp_path / "ckpts"))
    opened = []

    class Counted(ratings_sensor.Warehouse):
        def __init__(self, *args, **kwargs):
            opened.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(ratings_sensor, "Warehouse", Counted)
    monkeypatch.setattr(batch_sensor, "Warehouse", Counted)

    def tick(name: str, cursor: str | None) -> tuple[object, str | None]:
        ctx = dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor)
        result = defs.resolve_sensor_def(name)(ctx)
        return result, (result.cursor if isinstance(result, dg.SensorResult) else None) or ctx.cursor

    for name in ("ratings_sensor", "judge_batch_sensor"):
        opened.clear()
        first, cursor = tick(name, None)
        assert isinstance(first, dg.SkipReason) and len(opened) == 1 and cursor
        again, same = tick(name, cursor)
        assert isinstance(again, dg.SkipReason) and len(opened) == 1, again  # nothing changed: not opened
        assert same == cursor

        dg.materialize([dg.asset(name=f"something_{name}")(lambda: None)], instance=instance)  # a run ended
        tick(name, cursor)
        assert len(opened) == 2

    opened.clear()
    _, cursor = tick("ratings_sensor", None)
    tick("ratings_sensor", cursor)
    assert len(opened) == 1
    rated = ratings / "kg_qa" / "ckpt-0100.csv"
    rated.write_text(rated.read_text() + "\n")  # a rating file changed (size and time)
    later = time.time() + 5
    os.utime(rated, (later, later))
    tick("ratings_sensor", cursor)
    assert len(opened) == 2


def test_the_ratings_sensor_leaves_a_checkpoint_to_the_run_that_will_read_its_ratings(tmp_path, instance, monkeypatch):
    """#70, found by a UI backfill of 200 checkpoints: while the backfill's range runs were on their way, each
    checkpoint whose samples were written but whose ratings were not read yet looked stale, and the ratings sensor
    asked for a run of each (150 runs queued behind the backfill). A checkpoint whose ``human_ratings`` a run queued
    or in flight will materialize (a range of a UI backfill, a partition, the command's tags) is left to that run;
    once that run ends, the sensor looks again and asks for what is still stale."""
    from eval_pipeline.defs import ratings_sensor
    from eval_pipeline.defs.partitions import CHECKPOINTS_PARTITION

    ckpts = ["c1", "c2", "c3", "c4", "c5"]
    instance.add_dynamic_partitions(CHECKPOINTS_PARTITION, ckpts)
    # what the warehouse says is stale (the sensor's reading of it is tested above and in test_landing.py)
    monkeypatch.setattr(ratings_sensor, "stale_ratings", lambda *a: {"kg_qa": ("v2", list(ckpts))})
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(tmp_path / "ckpts"))
    ratings, samples = dg.AssetKey(["kg_qa", "human_ratings"]), dg.AssetKey(["kg_qa", "samples"])
    job = dg.Definitions(
        assets=[dg.asset(key=k)(lambda: None) for k in (ratings, samples)],
        jobs=[dg.define_asset_job("j", selection=[ratings, samples])],
    ).resolve_job_def("j")
    ranged = instance.create_run_for_job(  # a UI backfill's range, its ratings step still to come
        job,
        asset_selection={ratings, samples},
        status=dg.DagsterRunStatus.STARTED,
        tags={"dagster/asset_partition_range_start": "c1", "dagster/asset_partition_range_end": "c3"},
    )
    # a run of c4 that does not read its ratings, and a run of c5 (the command's tag) queued that does
    instance.create_run_for_job(job, asset_selection={samples}, tags={"dagster/partition": "c4"})
    instance.create_run_for_job(job, asset_selection={ratings}, tags={"eval/checkpoint": "c5"})

    def tick(cursor):
        ctx = dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor)
        result = defs.resolve_sensor_def("ratings_sensor")(ctx)
        asked = [r.partition_key for r in result.run_requests] if isinstance(result, dg.SensorResult) else []
        return asked, (result.cursor if isinstance(result, dg.SensorResult) else None) or ctx.cursor

    asked, cursor = tick(None)
    assert asked == ["c4"]
    assert tick(cursor)[0] == []  # nothing changed: no look
    instance.report_run_failed(ranged)  # the range run ended without reading them: they are stale still
    asked, _ = tick(cursor)
    assert asked == ["c1", "c2", "c3", "c4"]
