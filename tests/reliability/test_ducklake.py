"""The warehouse on DuckLake (#13, first part): the same pipeline on a DuckLake with a SQLite catalog, writers in
several processes at once with no pool, a reader that holds a connection for the whole run, and the read-only
guarantees of `eval-pipeline sql`.

Classes covered: several writers never lose or duplicate a partition (commits that lose a race are retried
whole); a reader never blocks a writer; a person's query writes nothing anywhere."""

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eval_pipeline.storage.warehouse import Warehouse
from tests.reliability.test_interruptions_and_concurrency import _spawn

HELD = re.compile(r"warehouse held from ([0-9.]+) to ([0-9.]+)")


@pytest.fixture
def lake(tmp_path, monkeypatch):
    spec = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_WAREHOUSE", spec)
    monkeypatch.delenv("EVAL_WAREHOUSE_DATA", raising=False)
    return spec


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_writers_at_once_with_no_pool_and_a_reader_held_open(lake, checkpoint_root):
    env = dict(os.environ, EVAL_JUDGE="heuristic", EVAL_CHECKPOINT_DIR=str(checkpoint_root), EVAL_WAREHOUSE=lake)
    wh = Warehouse(lake)
    wh.execute("CREATE TABLE IF NOT EXISTS main.ping AS SELECT 1 AS x")
    stop, reads = threading.Event(), []

    def reader():  # one connection, held open for the whole run, reading all along
        with wh.connect(read_only=True) as con:
            while not stop.is_set():
                reads.append(con.execute("SELECT count(*) FROM information_schema.tables").fetchall()[0][0])
                time.sleep(0.2)

    t = threading.Thread(target=reader)
    t.start()
    a = _spawn(env, lake, checkpoint_root, "ckpt-0100", "kg_qa", "npc_dialogue")
    b = _spawn(env, lake, checkpoint_root, "ckpt-0200", "kg_qa", "npc_dialogue")
    out_a, out_b = a.communicate(timeout=540)[0], b.communicate(timeout=540)[0]
    stop.set()
    t.join()
    assert a.returncode == 0, out_a[-3000:]
    assert b.returncode == 0, out_b[-3000:]
    assert len(reads) > 5  # the reader read throughout
    # warehouse steps of the two processes overlapped in time: no pool, no file lock
    spans = {name: [tuple(map(float, m)) for m in HELD.findall(out)] for name, out in (("a", out_a), ("b", out_b))}
    assert spans["a"] and spans["b"]
    assert any(s1 < e2 and s2 < e1 for s1, e1 in spans["a"] for s2, e2 in spans["b"])
    for rubric in ("kg_qa", "npc_dialogue"):
        for table in ("samples", "scores", "judge_scores", "summary", "gates"):
            rows = wh.query_rows(f"SELECT checkpoint_id, count(*) FROM {rubric}.{table} GROUP BY 1 ORDER BY 1")
            assert [c for c, _ in rows] == ["ckpt-0100", "ckpt-0200"], (rubric, table)
        assert wh.query_rows(f"SELECT count(*) FROM {rubric}.samples GROUP BY checkpoint_id") == [(60,), (60,)]
        dupes = wh.query_rows(
            f"SELECT count(*) FROM (SELECT checkpoint_id, sample_id, judge, dimension "
            f"FROM {rubric}.judge_scores GROUP BY ALL HAVING count(*) > 1)"
        )
        assert dupes == [(0,)]
        assert wh.query_rows(f"SELECT count(*) FROM main.quarantine WHERE rubric = '{rubric}'")[0][0] == 12


@pytest.mark.slow
def test_the_cli_runs_and_queries_a_lake_read_only(lake, checkpoint_root, tmp_path, monkeypatch, capfd):
    from eval_pipeline.cli import main as cli

    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(checkpoint_root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0  # re-run
    wh = Warehouse(lake)
    assert wh.query_rows("SELECT count(*) FROM kg_qa.scores")[0][0] == 60  # replaced, never duplicated
    capfd.readouterr()
    assert cli(["sql", "SELECT rubric, checkpoint_id, gates_total FROM main.leaderboard"]) == 0
    assert "kg_qa" in capfd.readouterr().out
    data = Path(wh.backend.data_path)
    for query in (
        f"COPY (SELECT 1) TO '{data / 'x.csv'}'",
        "DELETE FROM kg_qa.scores",
        "SELECT * FROM read_csv('/etc/hostname')",
        "ATTACH ':memory:' AS m",
    ):
        assert cli(["sql", query]) == 2, query
    assert not (data / "x.csv").exists()
    assert wh.query_rows("SELECT count(*) FROM kg_qa.scores")[0][0] == 60


@pytest.mark.slow
def test_time_travel_reads_the_leaderboard_before_a_run_and_maintenance_keeps_the_data(
    lake, checkpoint_root, tmp_path, monkeypatch, capfd
):
    from eval_pipeline.cli import main as cli

    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(checkpoint_root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0
    wh = Warehouse(lake)
    (before,) = wh.query_rows("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")[0]
    assert cli(["run", "--checkpoint", "ckpt-0200", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0
    capfd.readouterr()
    assert cli(["sql", "SELECT count(*) AS n FROM main.leaderboard"]) == 0
    assert capfd.readouterr().out.split() == ["n", "2"]
    assert cli(["sql", "--as-of", str(before), "SELECT count(*) AS n FROM main.leaderboard"]) == 0
    assert capfd.readouterr().out.split() == ["n", "1"]  # the leaderboard before the ckpt-0200 run
    assert cli(["maintain", "--keep-days", "0"]) == 0
    assert wh.query_rows("SELECT checkpoint_id, count(*) FROM kg_qa.scores GROUP BY 1 ORDER BY 1") == [
        ("ckpt-0100", 60),
        ("ckpt-0200", 60),
    ]
    file_backend = tmp_path / "w.duckdb"
    monkeypatch.setenv("EVAL_WAREHOUSE", str(file_backend))
    assert cli(["maintain"]) == 2 and "is for a DuckLake warehouse" in capfd.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_postgres_catalog_shared_by_two_machines_and_read_by_a_third(postgres_port, checkpoint_root, tmp_path):
    """Past one machine: a DuckLake whose catalog is on PostgreSQL (Debian's server, started by the test) and whose
    files are on a shared folder; two processes with separate Dagster instances (two machines, in effect) write
    different checkpoints at once, and a third reads what both wrote."""
    import psycopg2

    con = psycopg2.connect(host="127.0.0.1", port=postgres_port, user="postgres", dbname="postgres")
    con.autocommit = True
    con.cursor().execute("CREATE DATABASE lake")
    con.close()
    spec = f"ducklake:postgres:dbname=lake host=127.0.0.1 port={postgres_port} user=postgres"
    shared = tmp_path / "shared_files"
    env = dict(
        os.environ,
        EVAL_JUDGE="heuristic",
        EVAL_CHECKPOINT_DIR=str(checkpoint_root),
        EVAL_WAREHOUSE=spec,
        EVAL_WAREHOUSE_DATA=str(shared),
    )
    a = _spawn(env, spec, checkpoint_root, "ckpt-0100", "kg_qa")
    b = _spawn(env, spec, checkpoint_root, "ckpt-0200", "kg_qa")
    out_a, out_b = a.communicate(timeout=540)[0], b.communicate(timeout=540)[0]
    assert a.returncode == 0, out_a[-3000:]
    assert b.returncode == 0, out_b[-3000:]
    reader = subprocess.run(
        [
            sys.executable,
            "-c",
            "from eval_pipeline.storage.warehouse import Warehouse; "
            "print(Warehouse().run_readonly('SELECT checkpoint_id, count(*) FROM kg_qa.scores GROUP BY 1 ORDER BY 1')"
            ".values.tolist())",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert reader.returncode == 0, reader.stderr[-2000:]
    assert reader.stdout.strip() == "[['ckpt-0100', 60], ['ckpt-0200', 60]]"
    assert any(shared.rglob("*.parquet"))
    from eval_pipeline.storage.backends import lake as lake_module

    assert "dbname" not in lake_module.lake_backend(spec, str(shared)).describe()  # a conninfo may hold a password


def test_small_writes_go_to_parquet_unless_inlining_is_asked_for_and_maintain_flushes_it(lake, tmp_path, monkeypatch):
    import pandas as pd

    from eval_pipeline.cli import main as cli

    rows = pd.DataFrame({"checkpoint_id": ["a"] * 5, "x": range(5)})
    wh = Warehouse(lake)
    wh.replace_partition("r1", "t", rows, {"checkpoint_id": "a"})
    assert list(Path(wh.backend.data_path).rglob("*.parquet"))  # inlining off (the default): a Parquet file

    monkeypatch.setenv("EVAL_LAKE_INLINE_ROWS", "100")
    inlined = f"ducklake:sqlite:{tmp_path / 'inlined' / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_WAREHOUSE", inlined)
    wh = Warehouse(inlined)
    wh.replace_partition("r1", "t", rows, {"checkpoint_id": "a"})
    data = Path(wh.backend.data_path)
    assert not list(data.rglob("*.parquet"))  # the 5 rows are kept in the catalog
    assert cli(["maintain", "--keep-days", "0"]) == 0
    assert list(data.rglob("*.parquet"))  # flushed to a file
    assert wh.query_rows("SELECT x FROM r1.t ORDER BY x") == [(i,) for i in range(5)]


def test_views_are_created_again_only_when_their_sql_changes(lake):
    """Every publish step refreshes the views; on a DuckLake each CREATE is a new snapshot and costs every process
    its catalog cache, so a refresh that would write the same views writes nothing."""
    from eval_pipeline.storage.views import refresh_views

    wh = Warehouse(lake)
    wh.execute(
        "CREATE TABLE main.checkpoints AS SELECT 'c1' AS checkpoint_id, 'm' AS model, "
        "'2026-10-01T00:00:00Z' AS created_at, NULL::VARCHAR AS parent, '' AS path"
    )
    wh.execute('CREATE SCHEMA "r1"')
    wh.execute(
        "CREATE TABLE r1.summary AS SELECT 'c1' AS checkpoint_id, 'all' AS breakdown, "
        "'h' AS score, TRUE AS headline, 1.0 AS mean, 0.5 AS ci_low, 1.5 AS ci_high, 10 AS n"
    )

    def snapshots() -> int:
        return wh.query_rows("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")[0][0]

    assert refresh_views(wh, configured={"r1"}) == ["r1"]
    made = snapshots()
    assert refresh_views(wh, configured={"r1"}) == ["r1"] and snapshots() == made  # the same views: no write
    assert wh.query_rows("SELECT rubric, rubric_configured FROM main.leaderboard") == [("r1", True)]
    refresh_views(wh, configured=set())  # the rubric's file is gone: the leaderboard says so
    assert snapshots() > made
    assert wh.query_rows("SELECT rubric, rubric_configured FROM main.leaderboard") == [("r1", False)]
    wh.execute("CREATE OR REPLACE VIEW main.latest AS SELECT 1 AS x")  # a view replaced by hand loses its mark
    refresh_views(wh, configured=set())  # within a run, what it found or made is trusted
    assert wh.query_rows("SELECT * FROM main.latest") == [(1,)]
    refresh_views(Warehouse(lake), configured=set())  # the next run looks again and mends it
    assert wh.query_rows("SELECT rubric FROM main.latest") == [("r1",)]


def test_a_small_partition_written_in_chunks_is_one_snapshot_with_no_staging_table(lake):
    import pandas as pd

    wh = Warehouse(lake)
    wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [0]}), {"checkpoint_id": "a"})
    (before,) = wh.query_rows("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")[0]
    with wh.partition_writer() as w:
        for i in range(3):
            w.write("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [i + 1]}), {"checkpoint_id": "a"})
    (after,) = wh.query_rows("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")[0]
    assert after == before + 1  # held in memory, then one transaction: no staging table made or dropped
    assert wh.query_rows("SELECT x FROM r1.t ORDER BY x") == [(1,), (2,), (3,)]
    assert not wh.tables(schema="staging")


def test_a_steps_reads_see_one_snapshot_and_its_own_writes(lake):
    """Within a step, every read sees the lake as it was at the step's first read (another process's commit in
    between is not mixed in), until the step writes: its next read sees its own write and what others wrote."""
    import pandas as pd

    other = Warehouse(lake)  # another writer (its own backend, as another process would have)
    other.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [1]}), {"checkpoint_id": "a"})
    wh = Warehouse(lake)
    with wh.hold():
        assert wh.query_rows("SELECT x FROM r1.t") == [(1,)]
        other.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["b"], "x": [2]}), {"checkpoint_id": "b"})
        assert wh.query_rows("SELECT x FROM r1.t ORDER BY x") == [(1,)]  # the step's snapshot
        assert wh.query_df("SELECT count(*) AS n FROM r1.t").n.iloc[0] == 1
        wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["c"], "x": [3]}), {"checkpoint_id": "c"})
        assert wh.query_rows("SELECT x FROM r1.t ORDER BY x") == [(1,), (2,), (3,)]
    assert wh.query_rows("SELECT x FROM r1.t ORDER BY x") == [(1,), (2,), (3,)]


def test_a_failed_read_in_a_step_does_not_spoil_the_next(lake):
    import duckdb
    import pandas as pd

    wh = Warehouse(lake)
    wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [1]}), {"checkpoint_id": "a"})
    with wh.hold():
        with pytest.raises(duckdb.Error):
            wh.query_rows("SELECT no_such_column FROM r1.t")
        assert wh.query_rows("SELECT x FROM r1.t") == [(1,)]
        wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [5]}), {"checkpoint_id": "a"})
    assert wh.query_rows("SELECT x FROM r1.t") == [(5,)]


def test_a_new_table_is_made_and_written_in_one_snapshot_and_a_failed_first_write_leaves_none(lake):
    import pandas as pd

    wh = Warehouse(lake)
    wh.execute("CREATE TABLE main.ping AS SELECT 1 AS x")

    def snapshot() -> int:
        return wh.query_rows("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")[0][0]

    before = snapshot()
    wh.replace_partitions(
        [
            ("r2", "a", {"checkpoint_id": "c"}, [pd.DataFrame({"checkpoint_id": ["c"], "x": [1]})]),
            ("r2", "b", {"checkpoint_id": "c"}, [pd.DataFrame({"checkpoint_id": ["c"], "y": ["v"]})]),
        ]
    )
    assert snapshot() == before + 1  # schema, two tables and their rows: one commit
    assert wh.query_rows("SELECT x FROM r2.a") == [(1,)] and wh.query_rows("SELECT y FROM r2.b") == [("v",)]
    # a new table written twice in one transaction: the second replacement of a partition replaces the first
    wh.replace_partitions(
        [
            ("r4", "a", {"checkpoint_id": "c"}, [pd.DataFrame({"checkpoint_id": ["c", "c"], "x": [1, 2]})]),
            ("r4", "a", {"checkpoint_id": "d"}, [pd.DataFrame({"checkpoint_id": ["d"], "x": [3]})]),
            ("r4", "a", {"checkpoint_id": "c"}, [pd.DataFrame({"checkpoint_id": ["c"], "x": [4]})]),
        ]
    )
    assert wh.query_rows("SELECT checkpoint_id, x FROM r4.a ORDER BY x") == [("d", 3), ("c", 4)]
    import duckdb

    bad = pd.DataFrame({"checkpoint_id": ["c"], "z": ["not a number"]})
    with pytest.raises(duckdb.ConversionException):  # the second part cannot be inserted: nothing of it stays
        wh.replace_partitions(
            [
                ("r3", "a", {"checkpoint_id": "c"}, [pd.DataFrame({"checkpoint_id": ["c"], "x": [1]})]),
                ("r2", "a", {"checkpoint_id": "c"}, [bad.rename(columns={"z": "x"})]),
            ]
        )
    assert ("r3", "a") not in wh.tables(schema="r3") and wh.query_rows("SELECT x FROM r2.a") == [(1,)]
    wh.replace_partition("r3", "a", pd.DataFrame({"checkpoint_id": ["c"], "x": [7]}), {"checkpoint_id": "c"})
    assert wh.query_rows("SELECT x FROM r3.a") == [(7,)]


def test_a_streamed_partition_is_staged_on_disk_then_one_snapshot_and_a_failed_stream_changes_nothing(
    lake, tmp_path, monkeypatch
):
    import tempfile

    import duckdb
    import pyarrow as pa

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    wh = Warehouse(lake)
    schema = pa.schema([("checkpoint_id", pa.string()), ("n", pa.int64())])

    def batches(count: int, fail_at: int | None = None):
        for i in range(count):
            if i == fail_at:
                raise RuntimeError("the source broke off")
            yield pa.record_batch([["c"] * 1000, list(range(i * 1000, (i + 1) * 1000))], schema=schema)

    with wh.partition_writer(fixed_columns=True) as w:
        w.write_stream("r1", "raw", pa.RecordBatchReader.from_batches(schema, batches(5)), {"checkpoint_id": "c"})
    (before,) = wh.query_rows("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")[0]
    assert wh.query_rows("SELECT count(*), sum(n) FROM r1.raw") == [(5000, sum(range(5000)))]
    with pytest.raises(duckdb.Error, match="broke off"):  # DuckDB read the stream and says why it stopped
        with wh.partition_writer(fixed_columns=True) as w:
            w.write_stream(
                "r1", "raw", pa.RecordBatchReader.from_batches(schema, batches(5, 3)), {"checkpoint_id": "c"}
            )
    assert wh.query_rows("SELECT count(*) FROM r1.raw") == [(5000,)]  # the partition as it was
    assert wh.query_rows("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")[0] == (before,)
    assert list((tmp_path / "tmp").iterdir()) == []  # staged files removed either way


@pytest.mark.slow
def test_a_data_folder_deleted_under_the_lake_is_said_and_repaired(lake, checkpoint_root, tmp_path, monkeypatch, capfd):
    """#48: deleting the lake's data folder broke every later run of every checkpoint for good (an IO error). The
    run that meets a missing file says so in one line with the repair; `maintain --repair` drops the tables that
    lost files; the next run rebuilds them and the lake is whole again."""
    import shutil

    from eval_pipeline.cli import main as cli

    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(checkpoint_root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    run = ["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"]
    assert cli(run) == 0
    before = Warehouse(lake).query_rows("SELECT count(*) FROM kg_qa.judge_scores")[0][0]
    shutil.rmtree(tmp_path / "lake" / "catalog.sqlite.files")
    capfd.readouterr()
    assert cli(run) == 1
    out = capfd.readouterr()
    assert "is missing (its data folder was changed outside the pipeline)" in out.out + out.err
    assert "maintain --repair" in out.out + out.err and "Traceback" not in out.out + out.err
    assert cli(["maintain", "--repair"]) == 0
    said = capfd.readouterr().out
    assert "dropped kg_qa.judge_scores" in said and "eval-pipeline run" in said
    assert cli(run) == 0
    assert Warehouse(lake).query_rows("SELECT count(*) FROM kg_qa.judge_scores")[0][0] == before
    assert cli(["maintain", "--repair"]) == 0
    assert "nothing to repair" in capfd.readouterr().out


def test_ducklake_still_reads_a_cleanup_bound_on_a_sqlite_catalog_at_whole_days(lake):
    """What `maintain` works around (lake._scheduled_before): DuckLake 1.5.5 compares ``cleanup_old_files``'s
    ``older_than`` with the stored time as text, so a file scheduled for deletion today is older than the start of
    today. When this fails, DuckLake compares times: the day added to the bound can go (the grace stays)."""
    import pandas as pd

    wh = Warehouse(lake)
    for i in range(3):
        wh.replace_partition(
            "r1", "t", pd.DataFrame({"checkpoint_id": [f"c{i}"], "x": [i]}), {"checkpoint_id": f"c{i}"}
        )
    with wh.backend.writer() as con:
        con.execute("CALL ducklake_merge_adjacent_files('lake')")  # the three files scheduled for deletion now
        bound = "CAST(date_trunc('day', now()) AS TIMESTAMPTZ)"  # the start of today: before they were scheduled
        listed = con.execute(f"CALL ducklake_cleanup_old_files('lake', dry_run => true, older_than => {bound})")
        assert len(listed.fetchall()) == 3
