import pytest

from eval_pipeline.cli import main as cli
from tests.conftest import write_checkpoint


def test_errors_are_one_line_with_a_nonzero_exit(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(tmp_path / "ckpts"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", str(tmp_path / "none.duckdb"))
    assert cli(["run", "--rubric", "no_such_rubric"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [err[0]] and "unknown rubric(s) no_such_rubric" in err[0]
    assert cli(["run", "--checkpoint", "ckpt-x"]) == 2
    err = capsys.readouterr().err
    assert "no complete checkpoint folder for ckpt-x" in err and str(tmp_path / "ckpts") in err  # #73: names it
    assert cli(["sql", "SELECT 1"]) == 2
    assert "does not exist yet" in capsys.readouterr().err


def test_checkpoints_lists_complete_incomplete_and_refused(tmp_path, monkeypatch, capsys):
    root = tmp_path / "ckpts"
    row = {"sample_id": "s1", "user_statement": "hi", "response": "hello"}
    write_checkpoint(root, "ckpt-a", {"empathetic_dialogue": [row]})
    write_checkpoint(root, "ckpt-b", {"empathetic_dialogue": [row]}, complete=False)
    write_checkpoint(root, "bad id", {"empathetic_dialogue": [row]})
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", str(tmp_path / "none.duckdb"))
    assert cli(["checkpoints"]) == 0
    out = capsys.readouterr().out
    assert "ckpt-a" in out and "new" in out and "ckpt-b" in out and "still being written" in out
    assert "refused:" in out and "unsafe checkpoint id 'bad id'" in out


@pytest.mark.slow
def test_the_instance_make_installs_lets_backfill_runs_overlap_only_on_a_ducklake(tmp_path):
    """`make dagster-home` writes the instance for the warehouse: one run of a UI backfill at a time on a DuckDB
    file, two on a DuckLake; `eval-pipeline ui` names the setting when an instance does not fit its warehouse."""
    import shutil
    import subprocess

    from eval_pipeline.runtime.instance import backfill_limit_hint
    from tests.conftest import ROOT

    lake = "ducklake:sqlite:" + str(tmp_path / "lake" / "catalog.sqlite")
    for name, warehouse in (("file", str(tmp_path / "w.duckdb")), ("lake", lake)):
        home = tmp_path / name
        subprocess.run(
            # -o: the venv counts as installed; with PATH /usr/bin a pyproject.toml newer than .venv/.installed
            # otherwise had make re-create the developer's venv over Debian's python3 (its stdlib then missing)
            [shutil.which("make") or "make", "-s", "-C", str(ROOT), "-o", ".venv/.installed", "dagster-home"],
            env={"PATH": "/usr/bin:/bin", "DAGSTER_HOME": str(home), "EVAL_WAREHOUSE": warehouse},
            check=True,
        )
        assert backfill_limit_hint(home / "dagster.yaml", warehouse) is None
    hint = backfill_limit_hint(tmp_path / "file" / "dagster.yaml", lake)
    assert hint and "limit: 2" in hint and "dagster/backfill" in hint
    assert "limit: 1" in (backfill_limit_hint(tmp_path / "lake" / "dagster.yaml", str(tmp_path / "w.duckdb")) or "")


def test_a_server_on_a_busy_port_says_so_with_its_own_exit_code(capfd):
    """#34.6: `view` (and `ui`) on a port another server holds: exit 5, one line, not 3 (gates failed)."""
    import socket

    from eval_pipeline.cli import main as cli

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert cli(["view", "--port", str(port)]) == 5
    err = capfd.readouterr().err
    assert err.startswith("eval-pipeline: error: cannot serve on 127.0.0.1:") and len(err.strip().splitlines()) == 1


def test_help_and_usage_errors_import_nothing_heavy():
    """#34.6: `--help` took 2.7 s importing Dagster, DuckDB and pandas it never used."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom eval_pipeline.cli import main\n"
        "for argv in (['--help'], ['sql', '--help'], ['sql']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in ('dagster', 'duckdb', 'pandas', 'numpy', 'openai') if m in sys.modules))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout + res.stderr


@pytest.mark.slow
def test_export_writes_every_table_of_the_checkpoint_and_a_manifest(tmp_path, monkeypatch, capsys):
    """#34.5: `eval-pipeline export`: the checkpoint's rows of each table, exactly as the warehouse has them."""
    import json as _json

    import pandas as pd

    from eval_pipeline.cli import main as cli
    from eval_pipeline.storage.warehouse import Warehouse
    from tests.conftest import SAMPLE_CHECKPOINTS

    lake = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    for k, v in {"EVAL_CHECKPOINT_DIR": str(SAMPLE_CHECKPOINTS), "DAGSTER_HOME": str(tmp_path / "home"),
                 "EVAL_WAREHOUSE": lake, "EVAL_REPORT_DIR": str(tmp_path / "rep")}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0
    for fmt in ("parquet", "csv", "json"):
        out = tmp_path / f"out-{fmt}"
        assert cli(["export", "--checkpoint", "ckpt-0100", "--format", fmt, "--out", str(out)]) == 0
        manifest = _json.loads((out / "manifest.json").read_text())
        files = {f["table"]: f for f in manifest["files"]}
        assert {"kg_qa.samples", "kg_qa.judge_scores", "kg_qa.scores", "kg_qa.gates", "main.checkpoints"} <= set(files)
        wh = Warehouse(lake)
        for table, f in files.items():
            schema, name = table.split(".")
            where = "checkpoint_id = 'ckpt-0100'" + (
                " AND rubric = 'kg_qa'" if schema == "main" and name != "checkpoints" else ""
            )
            n = wh.query_rows(f'SELECT count(*) FROM "{schema}"."{name}" WHERE {where}')[0][0]
            assert f["rows"] == n, table
            path = out / f["path"]
            read = {"parquet": pd.read_parquet, "csv": pd.read_csv, "json": lambda p: pd.read_json(p, lines=True)}[fmt]
            assert len(read(path)) == n
    assert cli(["export", "--checkpoint", "ckpt-0100", "--out", str(out)]) == 2  # never into a folder with files
    # without --out, each format its own folder: a second export in another format is not refused (#60)
    monkeypatch.chdir(tmp_path)
    assert cli(["export", "--checkpoint", "ckpt-0100"]) == 0
    assert cli(["export", "--checkpoint", "ckpt-0100", "--format", "csv"]) == 0
    assert (tmp_path / "export-ckpt-0100-parquet" / "manifest.json").exists()
    assert (tmp_path / "export-ckpt-0100-csv" / "manifest.json").exists()
    assert cli(["export", "--checkpoint", "ckpt-9999", "--out", str(tmp_path / "x")]) == 2
    assert "no results for checkpoint 'ckpt-9999'" in capsys.readouterr().err
    # #48: a disk that fills up midway left files without a manifest: now whole or nothing, said in one line
    import errno

    from eval_pipeline.publish import export

    real, calls = export._write, []

    def full_disk(table, path, fmt):
        calls.append(path)
        if len(calls) > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(table, path, fmt)

    monkeypatch.setattr(export, "_write", full_disk)
    (tmp_path / "full").mkdir()
    capsys.readouterr()
    assert cli(["export", "--checkpoint", "ckpt-0100", "--out", str(tmp_path / "full")]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert list((tmp_path / "full").iterdir()) == [] and not list(tmp_path.glob(".full.partial-*"))


def test_a_model_name_of_a_megabyte_is_shown_shortened(tmp_path, monkeypatch, capsys):
    """#48: a 1 MB model name in checkpoint.json was printed whole by `checkpoints` (and `run`'s head line)."""
    import json

    from eval_pipeline.cli import main as cli

    folder = tmp_path / "ckpts" / "ckpt-big"
    folder.mkdir(parents=True)
    (folder / "kg_qa.jsonl").write_text("")
    (folder / "checkpoint.json").write_text(
        json.dumps({"model": "m" * 1_000_000, "created_at": "2026-10-01T00:00:00Z"})
    )
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(tmp_path / "ckpts"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", str(tmp_path / "w.duckdb"))
    assert cli(["checkpoints"]) == 0
    out = capsys.readouterr().out
    assert "ckpt-big" in out and max(len(line) for line in out.splitlines()) < 300


@pytest.mark.parametrize(
    "name, value, said",
    [
        ("EVAL_JUDGE", "opnai", "EVAL_JUDGE='opnai' is no judge backend (did you mean 'openai'?)"),
        ("EVAL_JUDGE_CONCURRENCY", "many", "EVAL_JUDGE_CONCURRENCY 'many' is not a whole number"),
        ("EVAL_JUDGE_TIMEOUT", "-1", "timeout_s must be > 0"),
    ],
)
def test_a_wrong_judge_setting_is_a_configuration_error_before_anything_runs(
    tmp_path, monkeypatch, capsys, name, value, said
):
    """#60: a misspelt EVAL_JUDGE failed 10 s into the run with exit 1; the docs say a configuration error is 2."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", str(tmp_path / "w.duckdb"))
    monkeypatch.setenv(name, value)
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa"]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.db"))  # nothing started


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_sql_shows_every_type_duckdb_has(tmp_path, monkeypatch, capsys, fmt):
    """#60: `SELECT * FROM test_all_types()` exited 1 with a pandas error (a union; dates past year 9999): the
    columns Python cannot hold are shown as DuckDB writes them."""
    from eval_pipeline.storage.warehouse import Warehouse

    wh_path = tmp_path / "w.duckdb"
    Warehouse(str(wh_path)).execute("CREATE TABLE t AS SELECT 1 AS x")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli(["sql", "--warehouse", str(wh_path), "--format", fmt, "SELECT * FROM test_all_types()"]) == 0
    out = capsys.readouterr().out
    assert "5877642-06-25 (BC)" in out or "290309-12-22 (BC)" in out  # a date Python has no type for, as text


def test_a_project_folder_that_is_not_there_is_said_as_such(tmp_path, monkeypatch, capsys):
    """#60: EVAL_PROJECT_DIR naming a missing folder said "run eval-pipeline run"."""
    monkeypatch.setenv("EVAL_PROJECT_DIR", str(tmp_path / "nowhere"))
    monkeypatch.delenv("EVAL_WAREHOUSE", raising=False)
    assert cli(["sql", "SELECT 1"]) == 2
    err = capsys.readouterr().err
    assert "EVAL_PROJECT_DIR names" in err and "not a folder" in err and "eval-pipeline run" not in err


def test_every_exit_code_of_the_help_is_in_the_operating_guide():
    """#60: exit 5 was missing from docs/operating.md's list."""
    import re
    from pathlib import Path

    from eval_pipeline.cli.common import EXIT_CODES

    codes = re.findall(r"^\s+(\d+)\s", EXIT_CODES, re.M)
    guide = (Path(__file__).resolve().parents[2] / "docs" / "operating.md").read_text()
    listed = guide[guide.index("**Exit codes**") :][:1200]
    assert codes and all(f"`{c}`" in listed for c in codes), codes


def test_every_option_says_what_it_does():
    """#60: 20 options of the CLI had no help text."""
    from eval_pipeline.cli.app import build_parser

    parser = build_parser()
    missing = [
        (name, "/".join(a.option_strings) or a.dest)
        for group in parser._subparsers._group_actions  # noqa: SLF001 - argparse keeps its subcommands here
        for name, sub in group.choices.items()
        for a in sub._actions  # noqa: SLF001
        if not a.help and a.dest != "help"
    ]
    assert missing == []


def test_the_installed_instance_shows_no_first_run_dialog(tmp_path, monkeypatch):
    """#60: Dagster's "join the community" dialog opened on an offline machine: the instance the project installs
    turns the UI's first-run dialogs off (and telemetry)."""
    import dagster as dg

    from eval_pipeline.runtime.instance import InstanceConfig

    (tmp_path / "dagster.yaml").write_text(InstanceConfig().render())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    instance = dg.DagsterInstance.get()
    try:
        assert instance.nux_enabled is False and instance.telemetry_enabled is False
    finally:
        instance.dispose()


def test_the_readme_names_every_command():
    """#73: the README's table of commands left out `batches`, `align` and `reference`."""
    import argparse

    from eval_pipeline.cli.app import build_parser
    from tests.conftest import ROOT

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    line = next(ln for ln in (ROOT / "README.md").read_text().splitlines() if "eval-pipeline --help` |" in ln)
    assert [c for c in sub.choices if f"`{c}`" not in line] == []


@pytest.mark.parametrize("target, flag", [("ui", "--port 3001"), ("view", "--port 3001"), ("annotate", "--port 3001")])
def test_make_servers_take_another_port(target, flag):
    """#73: `make ui` could not be told another port."""
    import subprocess

    from tests.conftest import ROOT

    shown = subprocess.run(["make", "-n", target, "PORT=3001"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and f"eval-pipeline {target}" in shown.stdout and flag in shown.stdout, shown


def test_sql_as_a_table_cuts_a_long_cell_and_csv_keeps_it_whole(tmp_path, monkeypatch, capsys):
    """#73: `sql "SELECT * FROM main.verdicts"` printed 4,745-character lines (a verdict's reasons)."""
    from eval_pipeline.storage.warehouse import Warehouse

    wh_path = tmp_path / "w.duckdb"
    Warehouse(wh_path).execute("CREATE TABLE t AS SELECT 1 AS n, repeat('reason ', 700) AS reasons")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli(["sql", "--warehouse", str(wh_path), "SELECT * FROM t"]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) < 200
    assert cli(["sql", "--warehouse", str(wh_path), "SELECT * FROM t", "--format", "csv"]) == 0
    assert "reason " * 700 in capsys.readouterr().out.replace('"', "")
