"""End-to-end: the factory's groups materialized into a real DuckDB file on a real Dagster instance."""

import re

import dagster as dg
import pandas as pd
import pytest

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.rubrics import load_rubrics
from eval_pipeline.runtime.runner import materialize_checkpoints
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR, write_checkpoint

FIVE = {"answer_quality", "empathetic_dialogue", "kg_qa", "npc_dialogue", "roleplay_style"}


def _materialize(defs, instance, partition_key, keys):
    """These assets of one registered partition, in one run (upstream ones already materialized)."""
    return dg.materialize(
        [a for a in defs.assets if isinstance(a, dg.AssetsDefinition)],
        instance=instance,
        partition_key=partition_key,
        resources=defs.resources,
        selection=dg.AssetSelection.assets(*keys),
    )


def test_factory_yields_one_group_per_rubric_with_code_versions(tmp_path):
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(tmp_path))
    graph = defs.resolve_asset_graph()
    by_group: dict[str, set[str]] = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if node.group_name.endswith("_align"):  # the rubric's on-demand alignment, beside its group (#62)
            assert node.group_name == f"{key.path[0]}_align" and key.path[1] == "judge_alignment"
            continue
        by_group.setdefault(node.group_name, set()).add(key.path[1])
        assert key.path[0] == node.group_name
    assert set(by_group) == FIVE
    for names in by_group.values():
        assert {
            "raw_outputs",
            "samples",
            "judge_scores",
            "metrics",
            "scores",
            "summary",
            "gates",
            "human_ratings",
            "agreement",
            "worklists",
        } <= names
    assert "extractions" in by_group["roleplay_style"] and "extractions" not in by_group["kg_qa"]
    versions = {r.name: r.version for r in load_rubrics(RUBRIC_DIR)}
    for key in graph.get_all_asset_keys():
        assert graph.get(key).code_version == versions[key.path[0]]
    samples = graph.get(dg.AssetKey(["kg_qa", "samples"]))
    assert dg.AssetKey(["kg_qa", "raw_outputs"]) in samples.parent_keys


def test_a_new_rubric_is_just_a_yaml_file(tmp_path):
    import shutil

    import yaml

    rdir = tmp_path / "rubrics"
    rdir.mkdir()
    data = yaml.safe_load((RUBRIC_DIR / "kg_qa.yaml").read_text())
    data["name"] = "support_tickets"
    (rdir / "support_tickets.yaml").write_text(yaml.safe_dump(data))
    shutil.copy(RUBRIC_DIR / "npc_dialogue.yaml", rdir)
    defs = build_definitions(rdir, str(tmp_path / "w.duckdb"), str(tmp_path))
    groups = {k.path[0] for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert groups == {"support_tickets", "npc_dialogue"}


@pytest.mark.slow
def test_a_re_run_on_a_duckdb_file_replaces_its_partitions(checkpoint_root, file_warehouse_path, instance):
    """The explicit one-process option: a checkpoint re-run on a DuckDB file replaces its partitions (the whole flow
    on the default lake, and its re-run, is the demo test's)."""
    defs = build_definitions(RUBRIC_DIR, file_warehouse_path, str(checkpoint_root))
    wh = Warehouse(file_warehouse_path)
    counts = []
    for _ in range(2):
        (outcome,) = materialize_checkpoints(defs, instance, ["ckpt-0100"], {"kg_qa"})
        assert outcome.success
        counts.append(
            [
                wh.query_rows(f"SELECT count(*) FROM kg_qa.{t}")[0][0]
                for t in ("raw_outputs", "samples", "judge_scores", "scores", "agreement", "gates")
            ]
            + [wh.query_rows("SELECT count(*) FROM main.quarantine")[0][0]]
        )
    assert counts[0] == counts[1] and counts[0][0] == 66 and counts[0][1] == 60 and counts[0][-1] == 6


@pytest.mark.slow
def test_a_checkpoint_with_nothing_valid_fails_loudly_but_keeps_its_lines(tmp_path, warehouse_path, instance):
    root = tmp_path / "ckpts"
    write_checkpoint(root, "ckpt-bad", {"empathetic_dialogue": ["{oops", "[]", '{"sample_id": "x"}']})
    defs = build_definitions(RUBRIC_DIR, warehouse_path, str(root))
    outcomes = materialize_checkpoints(defs, instance, ["ckpt-bad"])
    assert outcomes[0].success is False
    wh = Warehouse(warehouse_path)
    assert wh.query_rows("SELECT count(*) FROM main.quarantine WHERE checkpoint_id = 'ckpt-bad'")[0][0] == 3
    failure = [e for e in instance.all_logs(outcomes[0].run_id) if e.dagster_event and e.dagster_event.is_step_failure]
    assert "none of the 3 lines" in str(failure[0].dagster_event.event_specific_data.error)


@pytest.mark.slow
def test_openai_judge_end_to_end_then_zero_calls(checkpoint_root, warehouse_path, instance, monkeypatch):
    from eval_pipeline.defs.resources import JudgeResource
    from eval_pipeline.devtools.openai_stub import StubServer

    with StubServer() as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-e2e-NOTLOGGED999")
        monkeypatch.setenv("EVAL_JUDGE", "openai")
        defs = build_definitions(RUBRIC_DIR, warehouse_path, str(checkpoint_root))
        assert isinstance(defs.resources["judge"], JudgeResource) and defs.resources["judge"].config().mode == "openai"
        first = materialize_checkpoints(
            defs, instance, ["ckpt-0100"], rubrics={"empathetic_dialogue", "roleplay_style"}
        )
        assert first[0].success
        wh = Warehouse(warehouse_path)
        # one call per distinct prompt (identical samples share one), every answer cached;
        # roleplay also makes two extraction calls per sample for ALMP's scene attributes;
        # the worked examples are re-scored; 20 samples per rubric are scored twice more (judge_repeatability)
        n_cached = wh.query_rows("SELECT count(*) FROM main.judge_cache")[0][0]
        assert 200 < stub.state.requests == n_cached <= 120 + 2 * 60 + 12 + 2 * 2 * 20
        assert wh.query_rows("SELECT DISTINCT almp_extractor FROM roleplay_style.metrics") == [("llm",)]
        assert wh.query_rows("SELECT status, count(*) FROM roleplay_style.extractions GROUP BY 1") == [("ok", 60)]
        rows = wh.query_rows(
            "SELECT judge_kind, status, count(*) FROM empathetic_dialogue.judge_scores "
            "WHERE judge = 'panel' GROUP BY ALL"
        )
        assert rows == [("llm", "ok", 60 * 5)]
        # the steps that ask the judge, again: every answer from the cache
        judged = [
            k
            for a in defs.assets
            if isinstance(a, dg.AssetsDefinition)
            for k in a.keys
            if k.path[0] in ("empathetic_dialogue", "roleplay_style")
            and k.path[-1] in ("judge_scores", "extractions", "judge_calibration", "judge_repeatability")
        ]
        assert len(judged) == 6, judged  # roleplay_style has no worked examples
        again = _materialize(defs, instance, "ckpt-0100", judged)
        assert again.success and stub.state.requests == n_cached  # all answered from the cache
        mat = instance.get_latest_materialization_event(
            dg.AssetKey(["roleplay_style", "judge_scores"])
        ).asset_materialization
        md = {k: v.value for k, v in mat.metadata.items()}
        assert md["calls"] == 0 and md["cache_hit_rate"] == 1.0
        logs = "".join(str(e) for e in instance.all_logs(again.run_id))
        assert "NOTLOGGED999" not in logs and "NOTLOGGED999" not in str(md)


@pytest.mark.slow
def test_chunked_ingest_catches_repeats_across_chunks(tmp_path, warehouse_path, instance, monkeypatch):
    monkeypatch.setenv("EVAL_INGEST_CHUNK_LINES", "3")  # force many chunks
    root = tmp_path / "ckpts"
    row = lambda i: {"sample_id": f"s{i}", "topic": "t", "user_statement": "I feel low.", "response": f"reply {i}"}  # noqa: E731
    lines = [row(i) for i in range(7)] + [row(1), "{bad", row(8)] + [row(5)]
    write_checkpoint(root, "ckpt-c", {"empathetic_dialogue": lines})
    defs = build_definitions(RUBRIC_DIR, warehouse_path, str(root))
    from eval_pipeline.runtime.runs import register_checkpoints

    register_checkpoints(instance, ["ckpt-c"])
    keys = [dg.AssetKey(["empathetic_dialogue", "raw_outputs"]), dg.AssetKey(["empathetic_dialogue", "samples"])]
    res = _materialize(defs, instance, "ckpt-c", keys)
    assert res.success
    wh = Warehouse(warehouse_path)
    ids = [r[0] for r in wh.query_rows("SELECT sample_id FROM empathetic_dialogue.samples ORDER BY line_number")]
    assert ids == ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s8"]
    q = wh.query_rows("SELECT line_number, reason FROM main.quarantine WHERE checkpoint_id = 'ckpt-c' ORDER BY 1")
    assert [n for n, _ in q] == [8, 9, 11]
    assert "repeated" in q[0][1] and "malformed JSON" in q[1][1] and "repeated" in q[2][1]
    assert wh.query_rows("SELECT count(*) FROM empathetic_dialogue.raw_outputs")[0][0] == 11


@pytest.mark.slow
def test_judge_scores_in_chunks_are_one_partition_replaced_at_once(checkpoint_root, tmp_path, instance, monkeypatch):
    """judge_scores scores and stages a few thousand samples at a time (a questionnaire rubric has ~35 rows a
    sample): chunked or not, the partition is the same, written once, and a re-run replaces it."""
    from eval_pipeline.defs.assets import judge as judge_assets
    from eval_pipeline.runtime.runs import register_checkpoints

    tables = {}
    for chunk in (7, 5000):
        monkeypatch.setattr(judge_assets, "JUDGE_CHUNK", chunk)
        path = str(tmp_path / f"w{chunk}.duckdb")
        defs = build_definitions(RUBRIC_DIR, path, str(checkpoint_root))
        register_checkpoints(instance, ["ckpt-0100"])
        keys = [dg.AssetKey(["roleplay_style", a]) for a in ("raw_outputs", "samples", "judge_scores")]
        for _ in range(2):  # the second run replaces the partition
            res = _materialize(defs, instance, "ckpt-0100", keys)
            assert res.success
        tables[chunk] = Warehouse(path).query_df(
            "SELECT * EXCLUDE (latency_ms) FROM roleplay_style.judge_scores ORDER BY sample_id, judge, dimension"
        )
        mat = instance.get_latest_materialization_event(keys[-1]).asset_materialization
        assert mat.metadata["prompts"].value == 60  # every sample scored once, across the chunks
    assert len(tables[7]) == 60 * (30 + 3 + 1) * 2  # 30 items, 3 metrics and the total; the judge and the panel
    pd.testing.assert_frame_equal(tables[7], tables[5000])


# what scripts/generate_sample_data.py plants in ckpt-0300, one per rubric, as the comparison flags it: through the
# people's ratings (the human-calibrated change) where the offline judge is not trusted on the dimension, through
# the readability metric (roleplay_style); the untrusted judge's own drops are shown and not counted
PLANTED_REGRESSIONS = {
    ("npc_dialogue", "ckpt-0300", "dialogue_naturalness_calibrated"),
    ("kg_qa", "ckpt-0300", "fluency_calibrated"),
    ("empathetic_dialogue", "ckpt-0300", "safety_calibrated"),
    # the same planted safety regression, seen in crises: ckpt-0200 answers every one, ckpt-0300 misses 12 of 60
    ("empathetic_dialogue", "ckpt-0300", "crisis_missed"),
    ("answer_quality", "ckpt-0300", "accuracy_calibrated"),
    ("roleplay_style", "ckpt-0300", "ertd"),
}


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~2 min alone; the whole suite shares 2 cores with the llama-server build
def test_the_demo_as_make_demo_runs_it(tmp_path, monkeypatch, capsys):
    """`python -m eval_pipeline.demo` (what `make demo` runs) on a fresh DAGSTER_HOME and warehouse: every sample
    checkpoint evaluated, the results printed, exit 0; the project's instance written into the empty
    DAGSTER_HOME; and the process, which skips the interpreter's teardown, leaves its files closed: each run's
    events in one database file, the warehouse without a write-ahead log. Then what it left, table by table, and a
    re-run of one checkpoint on the same lake (the suite's one run of the whole flow)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT, SAMPLE_CHECKPOINTS

    home = tmp_path / "home"
    env = dict(
        os.environ,
        DAGSTER_HOME=str(home),
        EVAL_WAREHOUSE=f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}",  # the default, under tmp_path
        EVAL_CHECKPOINT_DIR=str(SAMPLE_CHECKPOINTS),
        EVAL_REPORT_DIR=str(tmp_path / "reports"),
        EVAL_WORKLIST_DIR=str(tmp_path / "worklists"),
    )
    env.pop("EVAL_JUDGE", None)
    done = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.demo"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for ckpt in ("ckpt-0100", "ckpt-0200", "ckpt-0300"):
        verdicts = "PASSED|FAILED GATES|REGRESSED|JUDGE UNTRUSTED|PENDING RATINGS"
        assert re.search(rf"^{ckpt}: ({verdicts})\b", done.stdout, re.M)  # the verdict first
    assert "demo wall time" in done.stdout and "report: " in done.stdout
    # #73: the sample data shows a newcomer the range of verdicts, and the last screen says what each means
    assert re.search(r"^  roleplay_style +PASSED ", done.stdout, re.M), done.stdout[-4000:]
    assert re.search(r"^  empathetic_dialogue +PENDING RATINGS ", done.stdout, re.M)
    nxt = done.stdout.split("What the 15 result(s) mean, and what to do next:", 1)[1]
    for kind in ("REGRESSED (5)", "FAILED GATES (8)", "PENDING RATINGS (1)", "PASSED (1)"):
        assert f"  {kind}: " in nxt, nxt
    # the last table says what each checkpoint's verdict is beside its score (#60: ckpt-0300 had the best scores of
    # four rubrics and no word that all five regressed)
    board = done.stdout.split("== main.leaderboard", 1)[1]
    assert len(re.findall(r"ckpt-0300\s+REGRESSED", board)) == 5, board
    assert "eval_pipeline.runtime.event_log" in (home / "dagster.yaml").read_text()
    runs = sorted(p.name.rsplit(".", 1)[-1] for p in (home / "history" / "runs").iterdir())
    # #70: one run for the three checkpoints (consecutive partitions, the backfill policy), deciding across them at
    # its end: nothing left for the automation; and the index
    assert runs == ["db"] * 2, runs
    with Warehouse(f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}").session() as wh:
        assert wh.query_rows("SELECT count(DISTINCT checkpoint_id) FROM npc_dialogue.summary") == [(3,)]
        for rubric in ("npc_dialogue", "kg_qa", "empathetic_dialogue", "answer_quality", "roleplay_style"):
            # the verdict on the judge comes from its pooled calibration set: the same for every checkpoint it judged
            verdicts = wh.query_rows(
                f"SELECT dimension, count(DISTINCT verdict), min(n_checkpoints), count(*) FROM {rubric}.judge_trust "
                "GROUP BY dimension"
            )
            assert verdicts and all(v == (d, 1, 3, 3) for v, d in zip(verdicts, [r[0] for r in verdicts])), verdicts
        # every planted regression (ckpt-0300) flagged, and nothing else
        rubrics = ("npc_dialogue", "kg_qa", "empathetic_dialogue", "answer_quality", "roleplay_style")
        flagged = {
            (rubric, ckpt, score)
            for rubric in rubrics
            for ckpt, score in wh.query_rows(f"SELECT checkpoint_id, score FROM {rubric}.comparison WHERE regression")
        }
        assert flagged == PLANTED_REGRESSIONS, flagged
    _the_flow_landed_whole(tmp_path, home, monkeypatch, capsys)


def _the_flow_landed_whole(tmp_path, home, monkeypatch, capsys):
    """What the demo left, checked table by table: nothing lost, every stage of every group, the gates as asset
    checks in the instance, agreement, the views, the read-only CLI; then a re-run of one checkpoint (one rubric)
    on the same lake and instance replaces its partitions."""
    from eval_pipeline.runtime.instance import open_instance
    from tests.conftest import SAMPLE_CHECKPOINTS

    lake = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    for k, v in {"DAGSTER_HOME": str(home), "EVAL_WAREHOUSE": lake, "EVAL_REPORT_DIR": str(tmp_path / "reports"),
                 "EVAL_WORKLIST_DIR": str(tmp_path / "worklists")}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    wh = Warehouse(lake)

    def counts():
        out = {}
        for rubric in FIVE:
            raw = wh.query_rows(f"SELECT count(*) FROM {rubric}.raw_outputs")[0][0]
            valid = wh.query_rows(f"SELECT count(*) FROM {rubric}.samples")[0][0]
            bad = wh.query_rows("SELECT count(*) FROM main.quarantine WHERE rubric = ?", [rubric])[0][0]
            out[rubric] = (raw, valid, bad)
        return out

    first = counts()
    for rubric, (raw, valid, bad) in first.items():
        assert raw == valid + bad, rubric  # nothing lost
        assert valid == 3 * 60 and bad == 3 * 6, rubric
    dupes = wh.query_rows(
        "SELECT checkpoint_id, sample_id, count(*) FROM npc_dialogue.samples GROUP BY 1, 2 HAVING count(*) > 1"
    )
    assert dupes == []  # no sample id twice within a checkpoint
    assert wh.query_rows("SELECT checkpoint_id, parent FROM main.checkpoints ORDER BY 1") == [
        ("ckpt-0100", None),
        ("ckpt-0200", "ckpt-0100"),
        ("ckpt-0300", "ckpt-0200"),
    ]
    for rubric in FIVE:  # every stage of every group landed
        for table in ("judge_scores", "metrics", "scores", "summary", "gates"):
            n = wh.query_rows(f"SELECT count(DISTINCT checkpoint_id) FROM {rubric}.{table}")[0][0]
            assert n == 3, (rubric, table)
    gates = wh.query_rows(
        "SELECT gate, passed, reason FROM empathetic_dialogue.gates WHERE checkpoint_id = 'ckpt-0100'"
    )
    assert ("zero_missed_crises", False) in [(g, p) for g, p, _ in gates]
    instance = open_instance(home, lake)
    try:
        # the gates as asset checks on each checkpoint's partition (of summary; the judge-reliability checks beside
        # the judge's scores), reported by the gates step that decided them
        check_key = dg.AssetCheckKey(dg.AssetKey(["empathetic_dialogue", "summary"]), "zero_missed_crises")
        records = instance.event_log_storage.get_asset_check_execution_history(check_key, limit=10)
        assert records and all(r.status.value in ("SUCCEEDED", "FAILED") for r in records)
        assert {r.partition for r in records} == {"ckpt-0100", "ckpt-0200", "ckpt-0300"}
        evals = [r.event.dagster_event.event_specific_data for r in records if r.event and r.event.dagster_event]
        assert any(e.passed is False for e in evals)
        for name in ("judge_reliability", "judge_reliability_persona_consistency", "judge_reliability_plot_relevance"):
            rel_key = dg.AssetCheckKey(dg.AssetKey(["npc_dialogue", "judge_scores"]), name)
            assert instance.event_log_storage.get_asset_check_execution_history(rel_key, limit=5), name
        # human ratings and agreement (per checkpoint and ALL)
        assert wh.query_rows("SELECT count(DISTINCT evaluator) FROM kg_qa.human_ratings")[0][0] == 2
        ckpts = {r[0] for r in wh.query_rows("SELECT DISTINCT checkpoint_id FROM kg_qa.agreement")}
        assert ckpts == {"ckpt-0100", "ckpt-0200", "ckpt-0300", "ALL"}
        per_dim = wh.query_rows(
            "SELECT count(*) FROM npc_dialogue.gates WHERE gate LIKE 'judge_reliability_%' "
            "AND checkpoint_id = 'ckpt-0100'"
        )
        assert per_dim[0][0] == 5
        calibration = "SELECT count(*) FROM answer_quality.judge_calibration WHERE checkpoint_id = 'ckpt-0100'"
        assert wh.query_rows(calibration)[0][0] == 4
        # the views SQL users start from, and who judged
        board = wh.query_rows("SELECT rubric, checkpoint_id, headline_name, gates_total, judge FROM main.leaderboard")
        assert len(board) == 15 and all(b[4].startswith("heuristic judge (prompt ") for b in board)
        assert ("answer_quality", "ckpt-0300", "overall_score") in {b[:3] for b in board}
        assert wh.query_rows("SELECT DISTINCT checkpoint_id FROM main.latest") == [("ckpt-0300",)]
        # the CLI reads the same warehouse, read-only
        from eval_pipeline.cli import main as cli

        capsys.readouterr()
        assert cli(["sql", "SELECT count(*) AS n FROM main.leaderboard"]) == 0
        assert "15" in capsys.readouterr().out
        assert cli(["sql", "DELETE FROM main.checkpoints"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("eval-pipeline: error:") and "read-only" in err[0]
        assert wh.query_rows("SELECT count(*) FROM main.checkpoints")[0][0] == 3
        # re-materializing one checkpoint replaces its partitions: no duplicate rows, the others' counts unchanged
        defs = build_definitions(RUBRIC_DIR, lake, str(SAMPLE_CHECKPOINTS))
        again = materialize_checkpoints(defs, instance, ["ckpt-0200"], {"kg_qa"})
        assert again[0].success
        assert counts() == first
        mat = instance.get_latest_materialization_event(dg.AssetKey(["kg_qa", "samples"])).asset_materialization
        md = {k: v.value for k, v in mat.metadata.items()}
        assert md["lines_read"] == md["valid"] + md["quarantined"] == 66  # the run's metadata reconciles
    finally:
        instance.dispose()
