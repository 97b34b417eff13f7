"""What judging costs (#34.4): per step usage in `<rubric>.judge_usage` and `main.judge_usage`, money from a price
table, the console's usage line, and a budget a run never exceeds."""

import shutil

import pytest

from eval_pipeline.cli import main as cli
from eval_pipeline.devtools.openai_stub import StubServer
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import SAMPLE_CHECKPOINTS

PRICES = "currency: EUR\nmodels:\n  gpt-4o-mini: {input: 0.15, output: 0.60}\n"


def _kg_qa_checkpoint(tmp_path):
    """ckpt-0100 with kg_qa's outputs only, under ``tmp_path/ckpts``; the price table at ``tmp_path/prices.yaml``."""
    root = tmp_path / "ckpts" / "ckpt-0100"
    root.mkdir(parents=True)
    for name in ("kg_qa.jsonl", "checkpoint.json"):
        shutil.copy(SAMPLE_CHECKPOINTS / "ckpt-0100" / name, root / name)
    (tmp_path / "prices.yaml").write_text(PRICES)


@pytest.fixture
def env(tmp_path, monkeypatch):
    _kg_qa_checkpoint(tmp_path)
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(tmp_path / "ckpts"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}")
    monkeypatch.setenv("EVAL_JUDGE", "openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("EVAL_PRICES", str(tmp_path / "prices.yaml"))
    with StubServer() as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        yield stub


def _usage():
    wh = Warehouse()
    cols = "step, calls, cache_hits, prompt_tokens, completion_tokens, latency_p50_ms, latency_p90_ms, cost, currency"
    throttle = "start_concurrency, timeout_cuts, final_concurrency"
    return wh.run_readonly(f"SELECT {cols}, not_asked_budget, {throttle} FROM main.judge_usage ORDER BY step")


@pytest.mark.slow
def test_usage_and_cost_are_recorded_per_step_and_shown(env, capfd):
    assert cli(["run", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0
    out = capfd.readouterr().out
    usage = _usage()
    assert set(usage.step) >= {"judge_scores", "judge_repeatability"}
    calls = int(usage.calls.sum())
    assert calls == env.state.completions  # every call the endpoint answered, counted once
    expected = (usage.prompt_tokens * 0.15 + usage.completion_tokens * 0.60) / 1e6
    assert usage.cost.tolist() == pytest.approx(expected.tolist(), rel=1e-12)
    assert (usage.currency == "EUR").all() and (usage.latency_p90_ms >= usage.latency_p50_ms).all()
    # how the client throttled itself is kept (#45): it started at the configured 16 and was never cut
    assert usage.start_concurrency.tolist() == [16] * len(usage) and usage.timeout_cuts.sum() == 0
    line = next(x for x in out.splitlines() if "judge usage:" in x)
    assert f"{calls} calls" in line and "EUR" in line and "p90" in line
    # the viewer's checkpoint page shows the same figures
    from starlette.testclient import TestClient

    from eval_pipeline.publish.viewer.app import create_app

    page = TestClient(create_app(Warehouse(read_only=True))).get("/r/kg_qa/ckpt-0100").text
    assert page.count('class="usage-row"') == len(usage) and "EUR" in page
    # a re-run is answered from the cache: no call, no cost; and the paid run's record stays (#60: the cached
    # re-run's row replaced it, 211 calls -> 0)
    first_runs = set(Warehouse().run_readonly("SELECT DISTINCT run_id FROM main.judge_usage").run_id)
    assert cli(["run", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0
    rows = Warehouse().run_readonly("SELECT run_id, calls, cost, cache_hits FROM main.judge_usage")
    again = rows[~rows.run_id.isin(first_runs)]
    assert len(again) and again.calls.sum() == 0 and again.cost.sum() == 0 and again.cache_hits.sum() > 0
    assert rows[rows.run_id.isin(first_runs)].calls.sum() == calls


@pytest.mark.slow
def test_a_run_never_spends_more_than_its_budget(env, monkeypatch, capfd):
    monkeypatch.setenv("EVAL_JUDGE_BUDGET", "0.004")
    assert cli(["run", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 4  # scores left unasked: incomplete
    out = capfd.readouterr().out
    usage = _usage()
    assert 0 < usage.cost.sum() <= 0.004 and usage.not_asked_budget.sum() > 0
    assert "prompts not asked: budget reached" in out
    wh = Warehouse()
    reasons = wh.run_readonly("SELECT DISTINCT reason FROM kg_qa.judge_scores WHERE status = 'missing'").reason
    assert reasons.str.contains("EVAL_JUDGE_BUDGET").all()


@pytest.mark.slow
def test_a_budget_without_a_price_for_the_model_stops_the_step_with_one_line(env, monkeypatch, capfd):
    monkeypatch.setenv("EVAL_JUDGE_BUDGET", "1")
    monkeypatch.setenv("EVAL_JUDGE_MODEL", "unpriced-model")
    assert cli(["run", "--rubric", "kg_qa"]) == 1
    out = capfd.readouterr().out
    assert "price table has no price for model 'unpriced-model'" in out
    assert env.state.completions == 0  # not one call made


@pytest.mark.slow
@pytest.mark.parametrize("fault, density", [("cut_off", 0.25), (None, 1.0)])
def test_a_budget_holds_whatever_is_asked_again_and_however_dense_the_tokenizer(env, monkeypatch, fault, density):
    """#48: EVAL_JUDGE_BUDGET=20 spent 38.66 when answers were cut at max_tokens and asked again (with more room:
    a second, larger request per prompt), and 51.41 with a tokenizer making a token of every character (the
    estimate assumed 3 characters a token). Each request now holds its cost from above (a token per byte, its own
    max_tokens) until its usage is known: what was spent never passes the budget."""
    budget = 0.01
    monkeypatch.setenv("EVAL_JUDGE_BUDGET", str(budget))
    env.state.tokens_per_char = density
    if fault:
        env.state.fault_rate, env.state.fault_kind = 1.0, fault
    cli(["run", "--rubric", "kg_qa", "--no-fail-on-gates"])
    usage = _usage()
    assert 0 < usage.cost.sum() <= budget  # something was bought, never more than the budget
    assert usage.not_asked_budget.sum() > 0  # and the rest was left unasked, with its reason
    assert usage.calls.sum() > 0


def test_a_rubric_cannot_ask_for_a_negative_answer_length():
    """#48: a negative max_tokens let every prompt through the budget (its estimate came out negative)."""
    from pydantic import ValidationError

    from eval_pipeline.core.config import JudgeSpec

    with pytest.raises(ValidationError, match="max_tokens"):
        JudgeSpec(name="j", max_tokens=-100)


@pytest.mark.slow
@pytest.mark.parametrize("table", ["fifo", "malformed"])
def test_a_price_table_that_cannot_be_read_stops_before_any_call(env, tmp_path, monkeypatch, capfd, table):
    """#48: a malformed EVAL_PRICES without a budget failed only after every call was paid; a FIFO hung the step."""
    import os

    path = tmp_path / "prices-bad.yaml"
    if table == "fifo":
        os.mkfifo(path)
    else:
        path.write_text("models: [not, a, mapping]\n")
    monkeypatch.setenv("EVAL_PRICES", str(path))
    assert cli(["run", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 1
    out = capfd.readouterr().out
    assert f"price table {path}" in out and env.state.completions == 0


@pytest.mark.slow
def test_the_launchpads_judge_config_sets_the_budget_and_the_prices(tmp_path, instance, monkeypatch):
    """The judge resource's config (docs/operating.md's launchpad block, as it is there) sets every judge setting
    the environment can, the budget and the price table included: with none of them in the environment, a run
    configured so spends at most its budget, priced by that table, and says why the rest were not asked."""
    import re

    import dagster as dg
    import yaml

    from eval_pipeline.defs.build import build_definitions
    from eval_pipeline.runtime.runs import register_checkpoints
    from tests.conftest import ROOT, RUBRIC_DIR

    for name in ("EVAL_JUDGE", "EVAL_JUDGE_BUDGET", "EVAL_PRICES", "EVAL_JUDGE_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    block = re.search(r"in the launchpad.*?```yaml\n(.*?)```", (ROOT / "docs" / "operating.md").read_text(), re.S)
    run_config = yaml.safe_load(block.group(1))
    judge = run_config["resources"]["judge"]["config"]
    assert {"mode", "budget", "prices"} <= set(judge)
    _kg_qa_checkpoint(tmp_path)
    lake = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    defs = build_definitions(RUBRIC_DIR, lake, str(tmp_path / "ckpts"))
    register_checkpoints(instance, ["ckpt-0100"])
    keys = [dg.AssetKey(["kg_qa", a]) for a in ("raw_outputs", "samples", "judge_scores")]
    with StubServer() as stub:
        judge.update(budget=0.004, prices=str(tmp_path / "prices.yaml"), base_url=stub.base_url)
        result = dg.materialize(
            [a for a in defs.assets if isinstance(a, dg.AssetsDefinition)],
            instance=instance,
            partition_key="ckpt-0100",
            resources=defs.resources,
            selection=dg.AssetSelection.assets(*keys),
            run_config=run_config,
        )
    assert result.success
    wh = Warehouse(lake)
    cost, unasked = wh.query_rows("SELECT sum(cost), sum(not_asked_budget) FROM kg_qa.judge_usage")[0]
    assert 0 < cost <= 0.004 and unasked > 0 and stub.state.completions > 0
    reasons = wh.query_rows("SELECT DISTINCT reason FROM kg_qa.judge_scores WHERE status = 'missing'")
    assert reasons and all("budget" in r for (r,) in reasons), reasons
