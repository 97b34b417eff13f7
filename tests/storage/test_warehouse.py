from pathlib import Path

import duckdb
import pandas as pd
import pytest

from eval_pipeline.core.ids import UnsafeIdentifierError
from eval_pipeline.storage import staging
from eval_pipeline.storage.warehouse import Warehouse

# The contract every warehouse backend keeps (the first tests below run on each; a backend added as one module is held
# to them too: tests/house/test_extending.py)


@pytest.fixture(params=["lake", "file"])
def each_backend(request, warehouse_path, file_warehouse_path):
    return {"lake": warehouse_path, "file": file_warehouse_path}[request.param]


def test_replace_partition_is_idempotent_and_inserts_by_name(each_backend):
    wh = Warehouse(each_backend)
    df = pd.DataFrame({"checkpoint_id": ["a", "a"], "x": [1, 2], "y": ["p", "q"]})
    wh.replace_partition("r1", "t", df, {"checkpoint_id": "a"})
    wh.replace_partition("r1", "t", df, {"checkpoint_id": "a"})
    # same columns in another order land in the right columns
    other = pd.DataFrame({"y": ["z"], "x": [9], "checkpoint_id": ["b"]})
    wh.replace_partition("r1", "t", other, {"checkpoint_id": "b"})
    rows = wh.query_rows("SELECT checkpoint_id, x, y FROM r1.t ORDER BY checkpoint_id, x")
    assert rows == [("a", 1, "p"), ("a", 2, "q"), ("b", 9, "z")]


def test_failed_insert_rolls_back_the_delete(each_backend):
    wh = Warehouse(each_backend)
    wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [1]}), {"checkpoint_id": "a"})
    bad = pd.DataFrame({"checkpoint_id": ["a"], "x": ["not a number"]})
    with pytest.raises(duckdb.Error):
        wh.replace_partition("r1", "t", bad, {"checkpoint_id": "a"})
    assert wh.query_rows("SELECT checkpoint_id, x FROM r1.t") == [("a", 1)]


def test_rows_must_belong_to_the_partition(each_backend):
    wh = Warehouse(each_backend)
    with pytest.raises(ValueError, match="must all have checkpoint_id"):
        wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["b"], "x": [1]}), {"checkpoint_id": "a"})


def test_new_columns_are_added_on_schema_evolution(each_backend):
    wh = Warehouse(each_backend)
    wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [1]}), {"checkpoint_id": "a"})
    wh.replace_partition(
        "r1", "t", pd.DataFrame({"checkpoint_id": ["b"], "x": [2], "z": [0.5]}), {"checkpoint_id": "b"}
    )
    assert wh.query_rows("SELECT checkpoint_id, z FROM r1.t ORDER BY 1") == [("a", None), ("b", 0.5)]


def test_unsafe_names_never_reach_sql(warehouse_path):
    wh = Warehouse(warehouse_path)
    with pytest.raises(UnsafeIdentifierError):
        wh.replace_partition('r1"; DROP TABLE x; --', "t", pd.DataFrame({"a": [1]}), {})
    with pytest.raises(UnsafeIdentifierError):
        wh.replace_partition("r1", "t", pd.DataFrame({"a": [1]}), {"a = 1 OR 1": 1})


def test_read_only_connection_refuses_writes(file_warehouse_path):
    warehouse_path = file_warehouse_path
    wh = Warehouse(warehouse_path)
    wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["a"]}), {"checkpoint_id": "a"})
    with wh.connect(read_only=True) as con, pytest.raises(duckdb.Error):
        con.execute("DELETE FROM r1.t")


def _staging_tables(wh):
    return wh.query_rows("SELECT table_name FROM information_schema.tables WHERE table_schema = 'staging'")


@pytest.fixture(params=["held", "staged"])
def buffer_rows(request, monkeypatch):
    """The partition writer's two paths: chunks held in memory, or (no memory budget) every chunk staged."""
    if request.param == "staged":
        monkeypatch.setattr(staging, "BUFFER_ROWS", 0)
    return request.param


@pytest.mark.slow
def test_partition_writer_replaces_partitions_from_chunks_all_at_once(warehouse_path, buffer_rows):
    wh = Warehouse(warehouse_path)
    wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [0]}), {"checkpoint_id": "a"})
    wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["b"], "x": [7]}), {"checkpoint_id": "b"})
    with wh.partition_writer() as w:
        w.write(
            "r1",
            "q",
            pd.DataFrame({"checkpoint_id": pd.Series([], dtype=object), "why": pd.Series([], dtype=object)}),
            {"checkpoint_id": "a"},
        )  # an empty first chunk still creates the table
        for i in range(3):
            w.write(
                "r1", "t", pd.DataFrame({"checkpoint_id": ["a"] * 2, "x": [10 * i, 10 * i + 1]}), {"checkpoint_id": "a"}
            )
            # nothing is visible before the block ends
            assert wh.query_rows("SELECT x FROM r1.t WHERE checkpoint_id = 'a'") == [(0,)]
        w.write("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [99], "new_col": ["n"]}), {"checkpoint_id": "a"})
    assert wh.query_rows("SELECT x FROM r1.t WHERE checkpoint_id = 'a' ORDER BY x") == [
        (0,),
        (1,),
        (10,),
        (11,),
        (20,),
        (21,),
        (99,),
    ]
    assert wh.query_rows("SELECT x, new_col FROM r1.t WHERE checkpoint_id = 'b'") == [
        (7, None)
    ]  # other partitions kept
    assert wh.query_rows("SELECT count(*) FROM r1.q") == [(0,)]
    assert _staging_tables(wh) == []


def test_partition_writer_failure_changes_nothing_and_leaves_no_staging(warehouse_path, buffer_rows):
    wh = Warehouse(warehouse_path)
    wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [1]}), {"checkpoint_id": "a"})
    with pytest.raises(RuntimeError, match="boom"):
        with wh.partition_writer() as w:
            w.write("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [2]}), {"checkpoint_id": "a"})
            raise RuntimeError("boom")
    assert wh.query_rows("SELECT x FROM r1.t") == [(1,)] and _staging_tables(wh) == []
    # a failing commit (a chunk whose type does not fit the existing column) rolls back too
    with pytest.raises(duckdb.Error):
        with wh.partition_writer() as w:
            w.write("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": ["not a number"]}), {"checkpoint_id": "a"})
    assert wh.query_rows("SELECT x FROM r1.t") == [(1,)] and _staging_tables(wh) == []
    with pytest.raises(ValueError, match="must all have checkpoint_id"), wh.partition_writer() as w:
        w.write("r1", "t", pd.DataFrame({"checkpoint_id": ["b"], "x": [3]}), {"checkpoint_id": "a"})


def test_staging_left_by_a_killed_writer_is_dropped(warehouse_path):
    import subprocess

    wh = Warehouse(warehouse_path)
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs
    wh.execute("CREATE SCHEMA IF NOT EXISTS staging")
    for name in (f"s{dead.pid}_1", f"s{staging._HOST}_{dead.pid}_2", f"s0badc0de_{dead.pid}_3"):
        wh.execute(f"CREATE TABLE staging.{name} AS SELECT 1 AS x")
    with wh.partition_writer() as w:
        w.write("r1", "t", pd.DataFrame({"checkpoint_id": ["a"], "x": [1]}), {"checkpoint_id": "a"})
    # this machine's dead writers' tables go; another machine's process (same pid or not) is not judged from here
    assert _staging_tables(wh) == [("s0badc0de_" + str(dead.pid) + "_3",)]


def test_partition_writer_stages_past_its_memory_budget(warehouse_path, monkeypatch):
    """Past BUFFER_ROWS the held chunks and every later one go to staging; the partition still lands whole."""
    monkeypatch.setattr(staging, "BUFFER_ROWS", 3)
    wh = Warehouse(warehouse_path)
    seen = []
    with wh.partition_writer() as w:
        for i in range(4):
            chunk = pd.DataFrame({"checkpoint_id": ["a"] * 2, "x": [2 * i, 2 * i + 1]})
            w.write("r1", "t", chunk, {"checkpoint_id": "a"})
            seen.append(len(_staging_tables(wh)))
    assert seen == [0, 1, 1, 1]  # held, then one staging table for the partition
    assert wh.query_rows("SELECT x FROM r1.t ORDER BY x") == [(i,) for i in range(8)]
    assert _staging_tables(wh) == []


def _other_process_can_open(path: str) -> bool:
    import subprocess
    import sys

    code = (
        f"import duckdb\ntry:\n    duckdb.connect({path!r}, read_only=True).close()\n"
        "except duckdb.IOException:\n    raise SystemExit(3)"
    )
    return subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


@pytest.mark.slow
def test_a_file_is_held_for_a_whole_run_and_another_process_is_told_who_has_it(file_warehouse_path):
    """A DuckDB file serves one process at a time: a run keeps it open from its first step to its end (no re-open
    and checkpoint per step), remembers its catalog meanwhile, and lets go when the run ends. Another process
    that wants it waits its lock timeout, then fails with one line naming the way out."""
    warehouse_path = file_warehouse_path
    import subprocess
    import sys

    wh = Warehouse(warehouse_path, lock_timeout_s=1)
    wh.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    assert wh.known_tables() is None  # outside a run: asked each time
    assert _other_process_can_open(warehouse_path)
    with wh.lingering():
        with wh.hold():
            wh.execute("INSERT INTO t VALUES (1)")
        assert ("main", "t") in (wh.known_tables() or {})
        assert not _other_process_can_open(warehouse_path)  # between two steps: still ours
        code = (
            "from eval_pipeline.storage.warehouse import Warehouse\n"
            f"Warehouse({warehouse_path!r}, lock_timeout_s=0.5).query_rows('SELECT 1')"
        )
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert other.returncode != 0
        assert "serves one process at a time" in other.stderr and "DuckLake" in other.stderr
        with wh.hold():
            assert wh.query_rows("SELECT count(*) FROM t") == [(1,)]
    assert wh.known_tables() is None
    assert _other_process_can_open(warehouse_path)  # the run is over


def test_the_backend_is_chosen_from_the_spec_and_the_orchestration_derives_what_it_needs(tmp_path):
    from eval_pipeline.storage.backend import BackendError, WarehouseBackend
    from eval_pipeline.storage.backends.file import FileBackend
    from eval_pipeline.storage.backends.lake import PostgresLake, SqliteLake
    from eval_pipeline.storage.registry import open_backend

    file = open_backend(str(tmp_path / "w.duckdb"))
    lake = open_backend(f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}")
    pg = open_backend("ducklake:postgres:dbname=evals password=hunter2", str(tmp_path / "data"))
    assert isinstance(file, FileBackend) and isinstance(lake, SqliteLake) and isinstance(pg, PostgresLake)
    for backend in (file, lake, pg):
        assert isinstance(backend, WarehouseBackend)
    assert (file.concurrent_writers, lake.concurrent_writers) == (False, True)
    from eval_pipeline.runtime.instance import backfill_runs_at_once

    spec_file, spec_lake = str(tmp_path / "w.duckdb"), f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    assert (backfill_runs_at_once(spec_file), backfill_runs_at_once(spec_lake)) == (1, 2)
    assert "hunter2" not in pg.describe()
    with pytest.raises(BackendError, match="EVAL_WAREHOUSE_DATA"):
        open_backend("ducklake:postgres:dbname=evals")
    with pytest.raises(BackendError, match="ducklake:sqlite"):
        open_backend("ducklake:mysql:x")


def test_a_sqlite_lake_whose_data_is_on_s3_makes_no_local_folder_of_that_address(tmp_path, monkeypatch):
    """A SQLite catalog with its rows on S3 (EVAL_WAREHOUSE_DATA=s3://…): preparing the catalog's folder made a local
    ``s3:/bucket/prefix`` folder in the working directory (a Path of the address)."""
    from eval_pipeline.storage.registry import open_backend

    monkeypatch.chdir(tmp_path)
    lake = open_backend(f"ducklake:sqlite:{tmp_path / 'cat' / 'catalog.sqlite'}", "s3://evals/lake")
    lake._prepare()
    assert (tmp_path / "cat").is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["cat"]


def test_the_default_warehouse_is_a_lake_under_data(monkeypatch):
    from eval_pipeline.core import settings
    from eval_pipeline.storage.backends.lake import SqliteLake

    monkeypatch.delenv("EVAL_WAREHOUSE", raising=False)
    backend = Warehouse().backend
    assert isinstance(backend, SqliteLake) and settings.warehouse_path().endswith("data/lake/catalog.sqlite")


def _arrow_chunk(ckpt: str, start: int, n: int, text: str = "x" * 200):
    import pyarrow as pa

    return pa.table(
        {
            "checkpoint_id": pa.array([ckpt] * n, pa.string()),
            "line_number": pa.array(range(start, start + n), pa.int64()),
            "raw_line": pa.array([f"{text}{i}" for i in range(start, start + n)], pa.string()),
        }
    )


def test_fixed_column_chunks_go_into_the_table_in_one_transaction_and_are_not_kept_in_memory(file_warehouse_path):
    """On a DuckDB file, chunks of one schema are inserted straight into the table inside one transaction:
    nothing is visible before the end, the other partitions stay, no staging table is made, and a chunk is
    freed once inserted (a registered chunk stayed alive until the commit: 1M raw lines held 2 GB)."""
    warehouse_path = file_warehouse_path
    import pyarrow as pa

    wh = Warehouse(warehouse_path)
    wh.replace_partition("r1", "raw", _arrow_chunk("a", 1, 3).to_pandas(), {"checkpoint_id": "a"})
    wh.replace_partition("r1", "raw", _arrow_chunk("b", 1, 2).to_pandas(), {"checkpoint_id": "b"})
    one_chunk = _arrow_chunk("a", 0, 20_000).nbytes
    peak = 0
    with wh.partition_writer(fixed_columns=True) as w:
        for k in range(25):
            w.write("r1", "raw", _arrow_chunk("a", 1 + 20_000 * k, 20_000), {"checkpoint_id": "a"})
            peak = max(peak, pa.total_allocated_bytes())
            assert wh.query_rows("SELECT count(*) FROM r1.raw WHERE checkpoint_id = 'a'") == [(3,)]
        assert _staging_tables(wh) == []
    assert peak < 4 * one_chunk, (peak, one_chunk)  # 25 chunks kept alive would be 25x
    assert wh.query_rows(
        "SELECT count(*), count(DISTINCT line_number), min(line_number), max(line_number) FROM r1.raw "
        "WHERE checkpoint_id = 'a'"
    ) == [(500_000, 500_000, 1, 500_000)]
    assert wh.query_rows("SELECT count(*) FROM r1.raw WHERE checkpoint_id = 'b'") == [(2,)]


def test_fixed_column_chunks_roll_back_on_failure_and_refuse_a_chunk_with_other_columns(file_warehouse_path):
    warehouse_path = file_warehouse_path
    wh = Warehouse(warehouse_path)
    wh.replace_partition("r1", "raw", _arrow_chunk("a", 1, 3).to_pandas(), {"checkpoint_id": "a"})
    with pytest.raises(RuntimeError, match="boom"):
        with wh.partition_writer(fixed_columns=True) as w:
            w.write("r1", "raw", _arrow_chunk("a", 1, 10), {"checkpoint_id": "a"})
            raise RuntimeError("boom")
    assert wh.query_rows("SELECT count(*) FROM r1.raw") == [(3,)]
    with pytest.raises(ValueError, match="must share their columns"):
        with wh.partition_writer(fixed_columns=True) as w:
            w.write("r1", "raw", _arrow_chunk("a", 1, 10), {"checkpoint_id": "a"})
            w.write(
                "r1",
                "raw",
                _arrow_chunk("a", 11, 10).append_column("extra", _arrow_chunk("a", 0, 10)[2]),
                {"checkpoint_id": "a"},
            )
    assert wh.query_rows("SELECT count(*) FROM r1.raw") == [(3,)]
    # the same writer on a DuckLake stages (its commits can race another process's): tested in test_ducklake


@pytest.mark.slow
def test_a_writer_killed_inside_its_one_transaction_leaves_the_previous_partition(file_warehouse_path, tmp_path):
    """SIGKILL while fixed-column chunks stream into one open transaction on a DuckDB file (its row groups
    already written to the file): the file opens, the previous partition is whole, and a re-run converges."""
    warehouse_path = file_warehouse_path
    import signal
    import subprocess
    import sys
    from pathlib import Path

    wh = Warehouse(warehouse_path)
    wh.replace_partition("r1", "raw", _arrow_chunk("a", 1, 5).to_pandas(), {"checkpoint_id": "a"})
    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from eval_pipeline.storage.warehouse import Warehouse
from tests.storage.test_warehouse import _arrow_chunk
wh = Warehouse({warehouse_path!r})
with wh.partition_writer(fixed_columns=True) as w:
    for k in range(1000):
        w.write("r1", "raw", _arrow_chunk("a", 1 + 50_000 * k, 50_000), {{"checkpoint_id": "a"}})
        if k == 6:
            print("written", flush=True)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert wh.query_rows("SELECT count(*), max(line_number) FROM r1.raw WHERE checkpoint_id = 'a'") == [(5, 5)]
    with wh.partition_writer(fixed_columns=True) as w:
        for k in range(3):
            w.write("r1", "raw", _arrow_chunk("a", 1 + 1000 * k, 1000), {"checkpoint_id": "a"})
    assert wh.query_rows("SELECT count(*), count(DISTINCT line_number) FROM r1.raw") == [(3000, 3000)]


def _raw_line_compression(path: str) -> set[str]:
    with duckdb.connect(path, read_only=True) as con:
        rows = con.execute(
            "SELECT DISTINCT compression FROM pragma_storage_info('r1.raw') WHERE column_name = 'raw_line' "
            "AND compression <> 'Constant'"
        ).fetchall()
    return {r[0] for r in rows}


@pytest.mark.parametrize("made_before", [False, True])
def test_raw_lines_are_stored_with_zstd_where_the_file_allows_it(file_warehouse_path, made_before):
    """The raw lines' column asks for zstd (its Arrow field): a new warehouse file (storage v1.2.0) stores it so;
    a file made before, whose storage has no zstd for text, keeps DuckDB's own choice rather than storing the
    lines raw (which is what zstd asked of such a file does)."""
    warehouse_path = file_warehouse_path
    import pyarrow as pa

    from eval_pipeline.ingest.jsonl import RAW_SCHEMA, iter_jsonl

    if made_before:  # what an earlier version of the pipeline created (DuckDB's default storage version)
        duckdb.connect(warehouse_path, config={"storage_compatibility_version": "v1.0.0"}).close()
    source = Path(warehouse_path).parent / "lines.jsonl"
    reply = "well met, traveller " * 20
    source.write_text("".join(f'{{"sample_id": "s{i}", "response": "{reply}"}}\n' for i in range(30_000)))
    chunk = next(iter_jsonl(source, "a"))
    wh = Warehouse(warehouse_path)
    with wh.partition_writer(fixed_columns=True) as w:
        stream = pa.RecordBatchReader.from_batches(RAW_SCHEMA, chunk.table.to_batches())  # as raw_outputs writes
        w.write_stream("r1", "raw", stream, {"checkpoint_id": "a"})
    wh.execute("CHECKPOINT")
    assert wh.query_rows("SELECT count(*), max(line_number) FROM r1.raw") == [(30_000, 30_000)]
    stored = _raw_line_compression(warehouse_path)
    if made_before:
        assert stored and not stored & {"ZSTD", "Uncompressed"}, stored
    else:
        assert stored == {"ZSTD"}, stored


@pytest.mark.slow
def test_a_warehouse_file_of_an_earlier_version_moves_into_the_lake_with_one_command(tmp_path, monkeypatch, capfd):
    """#33.1: `eval-pipeline migrate <file>` copies every table into the default lake, nothing lost, the file
    unchanged; a second run leaves what is there; `attach-sql` opens the result in a plain DuckDB, offline."""
    import hashlib
    import subprocess
    import sys

    from eval_pipeline.cli import main as cli

    old = str(tmp_path / "old.duckdb")
    wh = Warehouse(old)
    wh.replace_partition(
        "r1", "scores", pd.DataFrame({"checkpoint_id": ["a"] * 4, "x": [1, 2, 3, 4]}), {"checkpoint_id": "a"}
    )
    wh.replace_partition(
        "main", "checkpoints", pd.DataFrame({"checkpoint_id": ["a"], "model": ["m"]}), {"checkpoint_id": "a"}
    )
    wh.close()
    before = hashlib.sha256(Path(old).read_bytes()).hexdigest()
    lake = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_WAREHOUSE", lake)
    assert cli(["migrate", old]) == 0
    out = capfd.readouterr().out
    assert "r1.scores: 4 rows" in out and "main.checkpoints: 1 rows" in out
    assert hashlib.sha256(Path(old).read_bytes()).hexdigest() == before
    assert Warehouse(lake).query_rows("SELECT sum(x) FROM r1.scores") == [(10,)]
    assert cli(["migrate", old]) == 0 and "left as it is" in capfd.readouterr().out
    assert Warehouse(lake).query_rows("SELECT count(*) FROM r1.scores") == [(4,)]  # not copied twice
    assert cli(["attach-sql"]) == 0
    sql = capfd.readouterr().out
    assert "INSTALL" not in sql and "READ_ONLY" in sql
    query = "SELECT sum(x) FROM r1.scores"
    code = f"import duckdb; con = duckdb.connect(); con.execute({sql!r}); print(con.sql({query!r}).fetchall())"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == "[(10,)]", res.stderr


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            "IO Error: Timeout was reached error for HTTP PUT to 'http://127.0.0.1:9000/evals/lake/t/a.parquet'",
            "the object store http://127.0.0.1:9000 did not answer within 7 s, 2 retries (PUT evals/lake/t/a.parquet)",
        ),
        (
            "Failed to commit DuckLake transaction: IO Error: Could not establish connection error for HTTP HEAD to "
            "'https://s3.example.com/b/x.parquet'",
            "the object store https://s3.example.com could not be reached (HEAD b/x.parquet)",
        ),
        (
            "HTTP Error: HTTP GET error on 'http://minio:9000/b/ckpt/a.jsonl' (HTTP 503)",
            "the object store http://minio:9000 answered HTTP 503 (GET b/ckpt/a.jsonl)",
        ),
    ],
)
def test_an_object_store_that_fails_a_request_is_said_in_one_line_and_not_retried_as_a_race(error, said, monkeypatch):
    from eval_pipeline.storage.backends import lake

    monkeypatch.setenv("EVAL_S3_TIMEOUT", "7")
    monkeypatch.setenv("EVAL_S3_RETRIES", "2")
    hint = lake.failure_hint(error)
    assert hint is not None and hint.startswith(said), hint
    assert "committed nothing" in hint and "\n" not in hint
    assert not lake.is_retryable(duckdb.IOException(error))  # httpfs retried it; the catalog-race loop must not
    assert lake.failure_hint("Catalog Error: Table with name t does not exist!") is None
    assert lake.is_retryable(duckdb.TransactionException("Failed to commit: database is locked"))


@pytest.mark.parametrize(("name", "value"), [("EVAL_S3_TIMEOUT", "0"), ("EVAL_S3_RETRIES", "-1")])
def test_object_store_settings_out_of_range_are_refused(name, value, monkeypatch):
    from eval_pipeline.core import settings

    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        settings.s3_timeout_seconds() if name == "EVAL_S3_TIMEOUT" else settings.s3_retries()


@pytest.mark.slow
def test_a_lake_write_outlasting_the_catalogs_busy_timeout_is_retried_not_failed(tmp_path):
    """CI, round 6: two runs wrote one SQLite-catalogued lake at once and a step failed with "Failed to insert config
    option in DuckLake: database is locked" — the table option (keep_small) was the one write not retried. Here the
    catalog is held by another writer for longer than its busy timeout (10 s), as a long commit on a loaded machine
    does; every kind of write (an option, a statement, a partition) must wait its turn and then commit."""
    import subprocess
    import sys

    catalog = tmp_path / "lake" / "catalog.sqlite"
    wh = Warehouse(f"ducklake:sqlite:{catalog}")
    wh.execute("CREATE TABLE IF NOT EXISTS main.ping AS SELECT 1 AS x")
    hold = (  # another process (SQLite's locks are per process): holds the catalog past META_BUSY_TIMEOUT 10000
        "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], timeout=30); c.execute('BEGIN EXCLUSIVE'); "
        "print('held', flush=True); time.sleep(12); c.rollback()"
    )
    other = subprocess.Popen([sys.executable, "-c", hold, str(catalog)], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "held"
        wh.backend.keep_small("main", "ping")  # the write CI lost
        wh.execute("INSERT INTO main.ping VALUES (2)")
        assert other.poll() is not None, "the writes did not wait for the other writer"
    finally:
        other.kill()
        other.wait()
    assert wh.query_rows("SELECT sum(x) FROM main.ping") == [(3,)]
    options = wh.query_rows(
        "SELECT value FROM ducklake_options('lake') "
        "WHERE option_name = 'data_inlining_row_limit' AND scope_entry LIKE '%ping%'"
    )
    assert options and int(options[0][0]) > 0
