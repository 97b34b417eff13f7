"""#32.1: who judged is recorded, and a change of judge is never read as a change of model.

ckpt-0200 judged by the offline judge, ckpt-0300 (its child) by an LLM judge over real HTTP (the local
OpenAI-protocol server): the comparison says not comparable and why, the regression gate is pending with the
command that re-judges the parent, and the leaderboard names each judge."""

import dagster as dg
import pytest

from eval_pipeline.devtools.openai_stub import StubServer
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR, SAMPLE_CHECKPOINTS


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_parent_judged_by_another_judge_is_not_comparable_never_a_regression(tmp_path, monkeypatch):
    from eval_pipeline.defs.build import build_definitions
    from eval_pipeline.runtime.runner import materialize_checkpoints

    warehouse = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_WAREHOUSE", warehouse)
    with dg.instance_for_test() as instance:
        monkeypatch.setenv("EVAL_JUDGE", "heuristic")
        defs = build_definitions(RUBRIC_DIR, warehouse, str(SAMPLE_CHECKPOINTS))
        assert materialize_checkpoints(defs, instance, ["ckpt-0200"], {"kg_qa"})[0].success
        with StubServer() as stub:
            monkeypatch.setenv("EVAL_JUDGE", "openai")
            monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            monkeypatch.setenv("EVAL_JUDGE_MODEL", "stub-judge")
            defs = build_definitions(RUBRIC_DIR, warehouse, str(SAMPLE_CHECKPOINTS))
            assert materialize_checkpoints(defs, instance, ["ckpt-0300"], {"kg_qa"})[0].success
    wh = Warehouse(warehouse)
    who = dict(wh.query_rows("SELECT checkpoint_id, label FROM kg_qa.judge_identity ORDER BY 1"))
    assert who["ckpt-0200"].startswith("heuristic judge") and who["ckpt-0300"].startswith("stub-judge @ 127.0.0.1")
    comparison = wh.query_df("SELECT * FROM kg_qa.comparison WHERE checkpoint_id = 'ckpt-0300'")
    assert len(comparison) and (comparison.status == "not_comparable").all()
    assert comparison.delta.isna().all() and not comparison.regression.any()
    note = comparison.note.iloc[0]
    assert "parent ckpt-0200 judged by heuristic judge" in note and "this checkpoint by stub-judge" in note
    assert "eval-pipeline run --checkpoint ckpt-0200 --rubric kg_qa" in note
    gate = wh.query_df("SELECT * FROM kg_qa.gates WHERE checkpoint_id = 'ckpt-0300' AND gate = 'no_regression'")
    assert gate.status.iloc[0] == "pending" and "not comparable" in gate.reason.iloc[0]
    board = dict(wh.query_rows("SELECT checkpoint_id, judge FROM main.leaderboard WHERE rubric = 'kg_qa'"))
    assert board == who  # the leaderboard names who judged, never "llm default"
