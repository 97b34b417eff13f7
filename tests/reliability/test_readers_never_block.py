"""The default warehouse never blocks (#33) and a person's query cannot write (#36, items 1, 2, 10).

Classes covered: a reader holding a plain DuckDB connection, or `eval-pipeline sql` in a loop, during a run on
the default warehouse (a DuckLake on SQLite): no error, the run unharmed, every read a whole snapshot; the
query path writes no file whatever the statement (EXPLAIN ANALYZE of a COPY over the warehouse's own files),
reads nothing beside the warehouse, and works with any character in its path."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from eval_pipeline.cli import main as cli
from eval_pipeline.storage import connect
from eval_pipeline.storage.warehouse import Warehouse
from tests.reliability.test_interruptions_and_concurrency import _spawn


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _small_warehouse(spec: str) -> Warehouse:
    wh = Warehouse(spec)
    wh.replace_partition("r1", "t", pd.DataFrame({"checkpoint_id": ["a"] * 3, "x": [1, 2, 3]}), {"checkpoint_id": "a"})
    return wh


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["file", "lake"])
def test_no_statement_can_write_a_file_through_the_query_path(tmp_path, monkeypatch, capfd, backend):
    folder = tmp_path / "it's here"  # an apostrophe in the path (#36.10)
    folder.mkdir()
    (folder / "notes.txt").write_text("private")
    spec = str(folder / "w.duckdb") if backend == "file" else f"ducklake:sqlite:{folder / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_WAREHOUSE", spec)
    wh = _small_warehouse(spec)
    wh.close()
    target = folder / ("w.duckdb" if backend == "file" else "catalog.sqlite")
    before = _digest(target)
    t = str(target).replace("'", "''")
    attempts = [
        f"EXPLAIN ANALYZE COPY (SELECT 'gone' AS x) TO '{t}' (FORMAT csv, USE_TMP_FILE false)",
        f"COPY (SELECT 'gone' AS x) TO '{t}' (FORMAT csv)",
        f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{str(folder / 'new.csv').replace(chr(39), chr(39) * 2)}'",
        f"SELECT * FROM read_text('{str(folder / 'notes.txt').replace(chr(39), chr(39) * 2)}')",
        f"SELECT * FROM glob('{str(folder).replace(chr(39), chr(39) * 2)}/*')",
        "SELECT * FROM read_text('/etc/hostname')",
        "SET enable_external_access = true",
        "",
    ]
    for sql in attempts:
        capfd.readouterr()
        assert cli(["sql", sql]) == 2, sql
        err = capfd.readouterr().err
        assert err.startswith("eval-pipeline: error: ") and len(err.strip().splitlines()) == 1, err
        assert "private" not in err
    assert _digest(target) == before
    assert not (folder / "new.csv").exists()
    assert cli(["sql", "SELECT sum(x) AS s FROM r1.t", "--format", "csv"]) == 0
    assert capfd.readouterr().out == "s\n6\n"


def test_sql_writes_csv_json_and_parquet_and_ends_quietly_into_a_closed_pipe(tmp_path, monkeypatch, capfd):
    import subprocess
    import sys

    spec = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_WAREHOUSE", spec)
    _small_warehouse(spec).close()
    assert cli(["sql", "SELECT x FROM r1.t ORDER BY x", "--format", "json"]) == 0
    assert capfd.readouterr().out.splitlines() == ['{"x": 1}', '{"x": 2}', '{"x": 3}']
    out = tmp_path / "t.parquet"
    assert cli(["sql", "SELECT x FROM r1.t ORDER BY x", "--format", "parquet", "--out", str(out)]) == 0
    assert pd.read_parquet(out).x.tolist() == [1, 2, 3]
    assert cli(["sql", "SELECT 1", "--format", "parquet"]) == 2  # never to a terminal
    # a reader that stops after one line: no "Broken pipe", exit 0
    pipe = subprocess.run(
        f"{sys.executable} -m eval_pipeline.cli sql 'SELECT * FROM range(200000)' --format csv | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        env=dict(os.environ, EVAL_WAREHOUSE=spec),
        timeout=120,
        executable="/bin/bash",
    )
    assert pipe.stdout == "range\n" and "Broken pipe" not in pipe.stderr and "Error" not in pipe.stderr, pipe.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_held_reader_and_sql_in_a_loop_during_a_run_on_the_default_warehouse(tmp_path, monkeypatch, checkpoint_root):
    """(a) a plain DuckDB connection (the notebook helper) held for the whole run, querying all along; (b)
    `eval-pipeline sql` 50 times during the same run: no error anywhere, the run succeeds, and each read sees a
    whole snapshot (a checkpoint's samples and scores always agree in number)."""
    monkeypatch.delenv("EVAL_WAREHOUSE", raising=False)
    spec = f"ducklake:sqlite:{tmp_path / 'data' / 'lake' / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_WAREHOUSE", spec)
    env = dict(os.environ, EVAL_JUDGE="heuristic", EVAL_CHECKPOINT_DIR=str(checkpoint_root))
    first = _spawn(env, spec, checkpoint_root, "ckpt-0100", "kg_qa")
    assert first.wait(timeout=300) == 0
    notebook = connect(spec)
    stop, reads, errors = threading.Event(), [], []
    whole = (
        "SELECT (SELECT count(*) FROM kg_qa.samples WHERE checkpoint_id = 'ckpt-0200') AS samples, "
        "(SELECT count(DISTINCT sample_id) FROM kg_qa.scores WHERE checkpoint_id = 'ckpt-0200') AS scored"
    )

    def read_all_along() -> None:
        while not stop.is_set():
            try:
                notebook.execute("BEGIN TRANSACTION")  # one snapshot for both counts
                reads.append(notebook.execute(whole).fetchone())
                notebook.execute("COMMIT")
            except Exception as exc:  # noqa: BLE001 (every error is the finding)
                errors.append(repr(exc))
            time.sleep(0.2)

    t = threading.Thread(target=read_all_along)
    t.start()
    run = _spawn(env, spec, checkpoint_root, "ckpt-0200", "kg_qa")
    sql_codes = []
    while run.poll() is None and len(sql_codes) < 50:
        sql_codes.append(cli(["sql", "SELECT count(*) FROM main.leaderboard", "--format", "csv"]))
    out = run.communicate(timeout=300)[0]
    stop.set()
    t.join()
    notebook.close()
    assert run.returncode == 0, out[-3000:]
    assert errors == []
    assert sql_codes and set(sql_codes) == {0}
    assert len(reads) > 3
    # before the samples land both are 0; once scores land they cover every sample; never half a partition
    for samples, scored in reads:
        assert scored in (0, samples), reads


def test_maintain_runs_while_a_reader_reads_and_the_reader_sees_every_row(tmp_path, monkeypatch, capfd):
    """#33.5(d): merging files and expiring snapshots while a notebook reads: no error, no row lost."""
    spec = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_WAREHOUSE", spec)
    wh = Warehouse(spec)
    for i in range(12):  # many small writes: many small files to merge, many snapshots to expire
        part = pd.DataFrame({"checkpoint_id": [f"c{i}"] * 50, "x": range(50)})
        wh.replace_partition("r1", "t", part, {"checkpoint_id": f"c{i}"})
    reader = connect(spec)
    stop, seen, errors = threading.Event(), [], []

    def read() -> None:
        while not stop.is_set():
            try:
                seen.append(reader.execute("SELECT count(*), sum(x) FROM r1.t").fetchone())
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))

    t = threading.Thread(target=read)
    t.start()
    try:
        assert cli(["maintain", "--keep-days", "0"]) == 0
    finally:
        stop.set()
        t.join()
        reader.close()
    assert errors == [] and seen and set(seen) == {(600, 12 * sum(range(50)))}
    assert "merged small files" in capfd.readouterr().out


def test_the_viewer_on_a_file_reads_beside_a_held_reader_and_creates_nothing(tmp_path):
    """#36.21 (the viewer's pages on real results are in tests/publish/test_viewer.py): the viewer's warehouse is
    read-only, so a plain read-only reader holding a DuckDB file never makes it wait, and a missing warehouse is not
    created."""
    import subprocess
    import sys

    from starlette.testclient import TestClient

    from eval_pipeline.publish.viewer.app import create_app
    from eval_pipeline.storage.warehouse import Warehouse

    path = tmp_path / "w.duckdb"
    Warehouse(str(path)).execute("CREATE TABLE main.t AS SELECT 42 AS x")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1], read_only=True); "
         "print('held', flush=True); time.sleep(60)", str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        viewer = TestClient(create_app(Warehouse(str(path), read_only=True, lock_timeout_s=3)))
        assert viewer.get("/").status_code == 200
        assert holder.poll() is None  # answered while the other reader still holds the file (it holds it 60 s)
    finally:
        holder.kill()
        holder.wait()
    missing = tmp_path / "none" / "w.duckdb"
    page = TestClient(create_app(Warehouse(str(missing), read_only=True))).get("/")
    assert page.status_code == 200 and "No results yet" in page.text
    assert not missing.parent.exists()


def test_a_query_that_began_before_maintain_reads_its_snapshot_whole_after_it(tmp_path, monkeypatch):
    """A reader's query takes the latest snapshot when it starts and reads that snapshot's files until it ends; here
    a transaction holds it across `maintain --keep-days 0`, as a long query would. Maintenance used to expire the
    snapshot the moment its own merge committed the next one and delete the merged-away files at once: the reader
    then failed ("No snapshot found in DuckLake", a file not found) or saw a partition missing (found by CI, about
    one maintain in 150 with a reader in a loop)."""
    spec = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_WAREHOUSE", spec)
    wh = Warehouse(spec)
    for i in range(6):  # small files to merge, snapshots to expire
        wh.replace_partition(
            "r1", "t", pd.DataFrame({"checkpoint_id": [f"c{i}"] * 5, "x": range(5)}), {"checkpoint_id": f"c{i}"}
        )
    whole = (30, 6 * sum(range(5)))
    reader = duckdb.connect(config={"enable_external_file_cache": False})  # every read goes to the files
    reader.execute(wh.backend.attach_sql())  # the lake read-only, as `eval-pipeline attach-sql` gives it
    try:
        reader.execute("BEGIN TRANSACTION")
        assert reader.execute("SELECT count(*), sum(x) FROM r1.t").fetchone() == whole  # its snapshot taken
        listed = set(wh.backend.stored_files())  # what a query that began now may open
        assert cli(["maintain", "--keep-days", "0"]) == 0
        assert listed <= set(wh.backend.stored_files())  # merged away minutes ago at most: none deleted yet
        assert reader.execute("SELECT count(*), sum(x) FROM r1.t").fetchone() == whole  # its files still there
        reader.execute("COMMIT")
        assert reader.execute("SELECT count(*), sum(x) FROM r1.t").fetchone() == whole  # and the next snapshot
    finally:
        reader.close()
    (kept,) = wh.query_rows("SELECT count(*) FROM ducklake_snapshots('lake')")[0]
    assert kept >= 7  # replaced minutes ago at most: none expired yet (READER_GRACE_MINUTES)


def test_maintain_still_expires_and_deletes_what_was_replaced_long_enough_ago(tmp_path, monkeypatch):
    """The other side of the reader's grace: snapshots replaced before the kept window are expired, and the files
    only they listed, once scheduled for deletion longer ago than the grace, are deleted (the catalog's clock moved
    back two days, as if the writes and the first maintain had been then)."""
    spec = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_WAREHOUSE", spec)
    wh = Warehouse(spec)
    for i in range(4):
        part = pd.DataFrame({"checkpoint_id": ["a"] * 5, "x": range(i, i + 5)})
        wh.replace_partition("r1", "t", part, {"checkpoint_id": "a"})
    files = set(wh.backend.stored_files())

    def two_days_back(table: str, column: str) -> None:
        with wh.backend.writer() as con:
            con.execute(
                f"UPDATE __ducklake_metadata_lake.{table} "
                f"SET {column} = CAST(CAST({column} AS TIMESTAMPTZ) - INTERVAL '2 days' AS VARCHAR)"
            )

    two_days_back("ducklake_snapshot", "snapshot_time")
    assert cli(["maintain", "--keep-days", "1"]) == 0
    (left,) = wh.query_rows("SELECT count(*) FROM ducklake_snapshots('lake')")[0]
    assert left <= 2  # the writes' snapshots expired but the current one (and what maintain itself committed)
    two_days_back("ducklake_files_scheduled_for_deletion", "schedule_start")
    assert cli(["maintain", "--keep-days", "1"]) == 0
    assert not files <= set(wh.backend.stored_files())  # files only an expired snapshot listed: deleted
    assert wh.query_rows("SELECT sum(x) FROM r1.t")[0][0] == sum(range(3, 8))
