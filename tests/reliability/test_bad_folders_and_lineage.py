"""Never blocked by one bad folder, and lineage and time that mean what they say.

Classes covered: a checkpoint folder that cannot be read is skipped and reported by its path while every
other checkpoint goes on (#19.3); names the warehouse reserves are refused (#19.14); a checkpoint never has
itself or a cycle as its lineage (#19.15); created_at is parsed with its zone and compared as time (#19.16);
rubric files are read only from inside the checkpoint folder (#19.6)."""

import json
import os

import pytest

from eval_pipeline.cli import main as cli
from eval_pipeline.ingest.checkpoints import scan_checkpoints
from tests.conftest import write_checkpoint

ROW = {"sample_id": "s1", "topic": "t", "user_statement": "I feel low.", "response": "That sounds hard."}


def _bad_manifest(folder, kind):
    m = folder / "checkpoint.json"
    if kind == "directory":
        m.mkdir()
    elif kind == "fifo":
        os.mkfifo(m)
    elif kind == "deep":
        m.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "huge_number":
        m.write_text('{"model": "m", "created_at": "2026-10-01T00:00:00Z", "n": ' + "9" * 5000 + "}")
    elif kind == "dangling_link":
        m.symlink_to(folder / "nowhere.json")


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["directory", "fifo", "deep", "huge_number", "dangling_link"])
def test_one_unreadable_checkpoint_folder_is_reported_and_the_rest_goes_on(tmp_path, monkeypatch, capsys, kind):
    root = tmp_path / "ckpts"
    write_checkpoint(root, "ckpt-good", {"empathetic_dialogue": [ROW]})
    bad = write_checkpoint(root, "ckpt-bad", {"empathetic_dialogue": [ROW]}, complete=False)
    _bad_manifest(bad, kind)
    scan = scan_checkpoints(root)
    assert [c.checkpoint_id for c in scan.complete] == ["ckpt-good"]
    assert len(scan.refused) == 1 and str(bad) in scan.refused[0]
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", str(tmp_path / "w.duckdb"))
    assert cli(["checkpoints"]) == 0
    out = capsys.readouterr().out
    assert "ckpt-good" in out and f"refused: {bad}" in out


def test_reserved_and_self_referencing_checkpoints_are_refused(tmp_path):
    root = tmp_path / "ckpts"
    write_checkpoint(root, "ALL", {"empathetic_dialogue": [ROW]})
    write_checkpoint(root, "all", {"empathetic_dialogue": [ROW]})
    write_checkpoint(
        root,
        "ckpt-self",
        {"empathetic_dialogue": [ROW]},
        {"model": "m", "created_at": "2026-10-01T00:00:00Z", "parent": "ckpt-self"},
    )
    for a, b in (("ckpt-a", "ckpt-b"), ("ckpt-b", "ckpt-a")):
        write_checkpoint(
            root, a, {"empathetic_dialogue": [ROW]}, {"model": "m", "created_at": "2026-10-01T00:00:00Z", "parent": b}
        )
    write_checkpoint(
        root,
        "ckpt-ok",
        {"empathetic_dialogue": [ROW]},
        {"model": "m", "created_at": "2026-10-01T00:00:00Z", "parent": "ckpt-a"},
    )
    scan = scan_checkpoints(root)
    assert [c.checkpoint_id for c in scan.complete] == ["ckpt-ok"]  # its parent is refused, it is not
    refused = "\n".join(scan.refused)
    assert refused.count("reserved checkpoint id") == 2
    assert "cannot be its own parent" in refused
    assert "part of a parent cycle (ckpt-a -> ckpt-b)" in refused


def test_created_at_is_time_with_its_zone_not_text(tmp_path):
    root = tmp_path / "ckpts"
    stamps = {"ckpt-1": "2026-09-01T08:00:00Z", "ckpt-2": "2026-09-01T09:00:00+05:00", "ckpt-3": "2026-09-01"}
    for ckpt, stamp in stamps.items():
        write_checkpoint(root, ckpt, {"empathetic_dialogue": [ROW]}, {"model": "m", "created_at": stamp})
    write_checkpoint(root, "ckpt-week", {"empathetic_dialogue": [ROW]}, {"model": "m", "created_at": "2026-W01-1"})
    scan = scan_checkpoints(root)
    by_id = {c.checkpoint_id: c.created_at for c in scan.complete}
    assert by_id == {
        "ckpt-1": "2026-09-01T08:00:00Z",
        "ckpt-2": "2026-09-01T04:00:00Z",
        "ckpt-3": "2026-09-01T00:00:00Z",
    }
    assert sorted(by_id, key=by_id.get) == ["ckpt-3", "ckpt-2", "ckpt-1"]  # +05:00 is earlier than 08:00Z
    assert any("'2026-W01-1' is not an ISO-8601 date-time" in r for r in scan.refused)


def test_a_rubric_file_linked_from_outside_the_folder_is_not_read(tmp_path):
    root = tmp_path / "ckpts"
    folder = write_checkpoint(root, "ckpt-1", {"empathetic_dialogue": [ROW]})
    secret = tmp_path / "elsewhere.jsonl"
    secret.write_text(json.dumps(ROW) + "\n")
    (folder / "kg_qa.jsonl").symlink_to(secret)
    (ckpt,) = scan_checkpoints(root).complete
    assert set(ckpt.rubric_files) == {"empathetic_dialogue"}


@pytest.mark.slow
def test_one_bad_line_never_costs_its_neighbours(tmp_path, monkeypatch, capsys):
    """Class (#19.4-6): whatever is wrong with one line (a number the warehouse cannot hold, text that is not
    Unicode, a key given twice, a blank id) quarantines that line with its own reason; its neighbours are
    evaluated."""
    from eval_pipeline.storage.warehouse import Warehouse

    good = [json.dumps({**ROW, "sample_id": f"s{i}"}) for i in range(40)]
    bad = {
        "big_int": json.dumps({**ROW, "sample_id": "b1"})[:-1] + ', "extra": 1' + "0" * 400 + "}",
        "big_float": json.dumps({**ROW, "sample_id": "b2"})[:-1] + ', "extra": 1e400}',
        "surrogate": json.dumps({**ROW, "sample_id": "b3"}).replace('"b3"', '"b3\\ud83d"'),
        "duplicate": json.dumps({**ROW, "sample_id": "b4"})[:-1] + ', "sample_id": "b5"}',
        "blank_id": json.dumps({**ROW, "sample_id": "   "}),
    }
    write_checkpoint(tmp_path / "ckpts", "ckpt-1", {"empathetic_dialogue": good[:20] + list(bad.values()) + good[20:]})
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(tmp_path / "ckpts"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", str(tmp_path / "w.duckdb"))
    assert cli(["run", "--no-fail-on-gates"]) == 4, capsys.readouterr()  # 5 of 45 quarantined: incomplete, not failed
    wh = Warehouse(tmp_path / "w.duckdb")
    assert wh.query_rows("SELECT count(*) FROM empathetic_dialogue.samples")[0][0] == 40
    reasons = [
        r for (r,) in wh.query_rows("SELECT reason FROM main.quarantine WHERE stage = 'validate' ORDER BY line_number")
    ]
    assert len(reasons) == 5
    assert "integer of 401 digits" in reasons[0] and "1e400 is not a finite double" in reasons[1]
    assert "lone surrogate \\ud83d" in reasons[2] and "duplicate key(s) 'sample_id'" in reasons[3]
    assert "must not be empty or only whitespace" in reasons[4]


def test_a_rubric_whose_file_is_gone_is_marked_in_the_leaderboard(tmp_path):
    """Class (#19.17): results stay queryable, but never pass for current once their rubric file is deleted."""
    from eval_pipeline.storage.views import refresh_views
    from eval_pipeline.storage.warehouse import Warehouse

    wh = Warehouse(tmp_path / "w.duckdb")
    wh.execute(
        "CREATE TABLE main.checkpoints AS SELECT 'c1' AS checkpoint_id, 'm' AS model, "
        "'2026-10-01T00:00:00Z' AS created_at, NULL::VARCHAR AS parent, '' AS path"
    )
    for rubric in ("kept", "gone"):
        wh.execute(f'CREATE SCHEMA "{rubric}"')
        wh.execute(
            f"CREATE TABLE \"{rubric}\".summary AS SELECT 'c1' AS checkpoint_id, 'all' AS breakdown, "
            "'h' AS score, TRUE AS headline, 1.0 AS mean, 0.5 AS ci_low, 1.5 AS ci_high, 10 AS n"
        )
    refresh_views(wh, configured={"kept"})
    assert wh.query_rows("SELECT rubric, rubric_configured FROM main.leaderboard ORDER BY 1") == [
        ("gone", False),
        ("kept", True),
    ]


def test_rubric_files_naming_the_same_rubric_are_refused_not_skipped(tmp_path):
    from eval_pipeline.core.config import RubricConfigError
    from eval_pipeline.rubrics import load_rubrics
    from tests.conftest import RUBRIC_DIR

    text = (RUBRIC_DIR / "kg_qa.yaml").read_text()
    (tmp_path / "kg_qa.yaml").write_text(text)
    (tmp_path / "kg_qa.yml").write_text(text)
    with pytest.raises(RubricConfigError, match="kg_qa.yaml and kg_qa.yml name the same rubric"):
        load_rubrics(tmp_path)


def test_terminal_escapes_in_names_are_shown_escaped(tmp_path, monkeypatch, capsys):
    """Class (#19.19): text from checkpoint folders reaches the terminal escaped, never as control codes."""
    root = tmp_path / "ckpts"
    write_checkpoint(
        root,
        "ckpt-1",
        {"empathetic_dialogue": [ROW]},
        {"model": "evil\x1b[2J\x1b]0;pwned\x07", "created_at": "2026-10-01T00:00:00Z"},
    )
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", str(tmp_path / "w.duckdb"))
    assert cli(["checkpoints"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "evil\\x1b[2J" in out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["directory", "fifo", "dangling_link"])
def test_a_checkpoint_whose_rubric_files_cannot_be_read_is_refused_not_passed(tmp_path, monkeypatch, capsys, kind):
    """#36.20: it said `ok: 0 checkpoint(s) evaluated, every gate passed` and exited 0."""
    root = tmp_path / "ckpts"
    folder = write_checkpoint(root, "ckpt-bad", {})
    target = folder / "empathetic_dialogue.jsonl"
    {
        "directory": target.mkdir,
        "fifo": lambda: os.mkfifo(target),
        "dangling_link": lambda: target.symlink_to(folder / "gone"),
    }[kind]()
    scan = scan_checkpoints(root)
    assert not scan.complete and f"{target} is" in scan.refused[0]
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", str(tmp_path / "w.duckdb"))
    assert cli(["run"]) == 2
    err = capsys.readouterr().err
    assert "no complete checkpoint folders found; refused:" in err and "nothing to evaluate" in err
    assert cli(["run", "--checkpoint", "ckpt-bad"]) == 2
    assert "checkpoint refused:" in capsys.readouterr().err


def test_created_at_outside_the_calendar_in_utc_names_the_field(tmp_path):
    from eval_pipeline.ingest.checkpoints import CheckpointError, normalise_created_at

    with pytest.raises(CheckpointError, match="'created_at' '0001-01-01T00:00:00\\+14:00' falls outside the years"):
        normalise_created_at("0001-01-01T00:00:00+14:00", "m.json")


def test_a_failed_step_is_one_line_without_dagsters_stack_unless_debug(tmp_path, monkeypatch, capfd):
    """#36.24: a failed step printed Dagster's stack (90 lines, 26 frames) without --debug."""
    root = tmp_path / "ckpts"
    write_checkpoint(root, "ckpt-x", {"empathetic_dialogue": ['{"bad": 1}']})
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", str(tmp_path / "w.duckdb"))
    assert cli(["run"]) == 1
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "Stack Trace" not in out + err and "dagster._core" not in out + err
    failed = [line for line in out.splitlines() if "step FAILED" in line]
    assert failed == [
        "    step FAILED empathetic_dialogue__samples: checkpoint 'ckpt-x': none of the 1 lines of "
        "empathetic_dialogue.jsonl is a valid sample (1 quarantined; see main.quarantine)"
    ]
    assert len((out + err).splitlines()) <= 6
