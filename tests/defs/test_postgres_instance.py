"""The Dagster instance on PostgreSQL (dagster-postgres): a real server from Debian's packages, started
for the test in a temporary folder; only dagster.yaml changes, nothing in the asset code."""

import dagster as dg
import pytest

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.runtime.runner import materialize_checkpoints
from tests.conftest import RUBRIC_DIR


@pytest.mark.slow
def test_the_dagster_instance_on_postgres(postgres_port, tmp_path, monkeypatch, checkpoint_root):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(f"""
storage:
  postgres:
    # the URL names the psycopg2 driver: SQLAlchemy 2.1 defaults postgresql:// to psycopg 3, whose
    # server-side parameters break dagster-postgres's `NOTIFY run_events, %s` (docs/design/scaling-history.md)
    postgres_url: postgresql+psycopg2://postgres:unused-trust-auth@127.0.0.1:{postgres_port}/dagster
concurrency:
  pools:
    default_limit: 1
telemetry:
  enabled: false
""")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(checkpoint_root))
    with dg.DagsterInstance.get() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        # the sensor registers the checkpoints as dynamic partitions in Postgres
        sensor = defs.resolve_sensor_def("checkpoint_sensor")
        result = sensor(dg.build_sensor_context(instance=instance, definitions=defs))
        for req in result.dynamic_partitions_requests:
            instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        assert sorted(r.partition_key for r in result.run_requests) == ["ckpt-0100", "ckpt-0200", "ckpt-0300"]
        outcome = materialize_checkpoints(defs, instance, ["ckpt-0100"], {"kg_qa"})[0]
        assert outcome.success
    # a second process's view (the webserver, the daemon) of the same Postgres: partitions, run, assets, checks
    with dg.DagsterInstance.get() as other:
        assert sorted(other.get_dynamic_partitions("checkpoints")) == ["ckpt-0100", "ckpt-0200", "ckpt-0300"]
        run = other.get_run_by_id(outcome.run_id)
        assert run is not None and run.is_success and run.tags["dagster/partition"] == "ckpt-0100"
        scores = other.get_latest_materialization_event(dg.AssetKey(["kg_qa", "scores"]))
        assert scores is not None and scores.dagster_event.partition == "ckpt-0100"
        assert other.get_latest_materialization_event(dg.AssetKey(["kg_qa", "gates"])) is not None  # over all
        kg_checks = [k for c in defs.asset_checks for k in c.check_keys if k.asset_key.path[0] == "kg_qa"]
        assert kg_checks and all(
            other.event_log_storage.get_asset_check_execution_history(k, limit=1) for k in kg_checks
        )
    import psycopg2

    con = psycopg2.connect(host="127.0.0.1", port=postgres_port, user="postgres", dbname="dagster")
    cur = con.cursor()
    cur.execute("SELECT count(*) FROM runs")
    assert cur.fetchone()[0] == 1
    cur.execute("SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")
    assert cur.fetchone()[0] >= 10
    con.close()
