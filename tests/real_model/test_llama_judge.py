"""The real-model tier (#45): llama.cpp's server, built from the pinned PyPI sdist, serving SmolLM2-135M-Instruct
from its pinned wheel, on a free port with one thread and 4 slots. Each test asserts what a person pointing the
pipeline at a small local model would check: it finishes with the defaults, repeats are real second draws, every
score has its probabilities or the reason it has none, a cut-off answer is never a score, the answer schemas are
bounded, pass-through options reach the server, and who judged is recorded.

`make test` runs this tier (the build starts in the background when the session starts: tests/conftest.py);
`make test-fast` leaves it out. A build that fails is a failure of every test here, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
import yaml

from eval_pipeline.core.config import JudgeSpec
from eval_pipeline.devtools.llama import MODEL_NAME, judge_env, small_checkpoint, without_settings
from eval_pipeline.judge.extraction import ITEM_MAX_CHARS, OBSERVATIONS_MAX, extract
from eval_pipeline.judge.runner import judge_samples
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR, SAMPLE_CHECKPOINTS
from tests.helpers.judges import openai_judge

pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_model,
    pytest.mark.timeout(2400),  # the first may wait for the server's build (started when the session started)
]

KEY = "sk-llama-local-KEY0123456789"
EVAL = str(Path(sys.executable).with_name("eval-pipeline"))


def _records(rubric: str, n: int) -> list[dict]:
    lines = (SAMPLE_CHECKPOINTS / "ckpt-0300" / f"{rubric}.jsonl").read_text().splitlines()[:n]
    return [json.loads(line) for line in lines]


def _with_judge(rubric, **spec):
    """The rubric with one panel judge: the defaults (model from EVAL_JUDGE_MODEL) and these fields."""
    panel = rubric.panel.model_copy(update={"judges": [JudgeSpec(name="smollm", **spec)]})
    return rubric.model_copy(update={"panel": panel})


@pytest.fixture
def server_env(llama_server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("EVAL_JUDGE_MODEL", MODEL_NAME)
    return llama_server


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, llama_server):
    """A project holding four samples of ckpt-0300, evaluated on npc_dialogue through the CLI with every judge
    setting at its default (repeats included): the command's result, its folder and environment."""
    root = tmp_path_factory.mktemp("llm_project")
    shutil.copytree(RUBRIC_DIR, root / "rubric_configs")
    small_checkpoint(SAMPLE_CHECKPOINTS / "ckpt-0300", root / "data" / "checkpoints", samples=4)
    (root / "data" / "human_ratings").mkdir(parents=True)
    env = judge_env(without_settings(dict(os.environ)), llama_server, root, api_key=KEY)
    cmd = [EVAL, "run", "--checkpoint", "ckpt-llm", "--rubric", "npc_dialogue", "--no-fail-on-gates"]
    res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    return res, root, env


def _sql(evaluated, query: str) -> pd.DataFrame:
    _, root, env = evaluated
    res = subprocess.run(
        [EVAL, "sql", "--format", "json", query], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    return pd.DataFrame([json.loads(line) for line in res.stdout.splitlines() if line.strip()])


def test_a_small_checkpoint_with_the_defaults_finishes_without_a_wave_of_cut_calls(evaluated, llama_server):
    res, _, _ = evaluated
    out = res.stdout + res.stderr
    assert res.returncode in (0, 4), out[-3000:]  # 4: the small model left answers unusable (said, with reasons)
    assert KEY not in out
    usage = _sql(evaluated, "SELECT step, calls, start_concurrency, timeout_cuts FROM npc_dialogue.judge_usage")
    assert set(usage.step) == {"judge_scores", "judge_repeatability"} and (usage.calls > 0).all()
    # the server said it serves 4 at once (/props): the first step started there, not at the configured 16, and
    # lost no wave of calls (at most one halving while it learnt the time-out); the repeats started where the
    # first step settled and lost none
    first, repeats = (usage[usage.step == s].iloc[0] for s in ("judge_scores", "judge_repeatability"))
    assert first.start_concurrency == llama_server.slots and first.timeout_cuts <= 1, usage
    assert repeats.start_concurrency <= llama_server.slots and repeats.timeout_cuts == 0, usage
    rows = _sql(evaluated, "SELECT status, score, reason FROM npc_dialogue.judge_scores WHERE judge <> 'panel'")
    assert len(rows) == 4 * 5
    ok = rows[rows.status == "ok"]
    assert ok.score.notna().all() and rows[rows.status != "ok"].reason.notna().all()
    assert rows[rows.status != "ok"].score.isna().all()


def test_who_judged_and_whether_it_is_trusted_are_recorded(evaluated, llama_server):
    identity = _sql(evaluated, "SELECT models, endpoint, backend, label FROM npc_dialogue.judge_identity")
    assert identity.models.tolist() == [MODEL_NAME]
    assert f"127.0.0.1:{llama_server.port}" in identity.endpoint[0] and identity.backend[0] == "openai"
    verdict = _sql(evaluated, "SELECT verdict, trust FROM npc_dialogue.verdict WHERE checkpoint_id = 'ckpt-llm'")
    # no person has rated these four samples: the judge's trust is pending, and the verdict says so
    assert verdict.trust.tolist() == ["pending"], verdict
    res, _, _ = evaluated
    assert "pending" in res.stdout.lower()


def test_repeats_are_second_draws_with_their_own_seed(server_env, rubrics, tmp_path):
    from eval_pipeline.judge.llm_rows import repeat_seed

    rubric = _with_judge(rubrics["npc_dialogue"], temperature=0.9)
    records, wh = _records("npc_dialogue", 2), Warehouse(str(tmp_path / "w.duckdb"))
    first, _ = judge_samples(rubric, "c", records, wh, openai_judge())
    repeat, _ = judge_samples(rubric, "c", records, wh, openai_judge(), repeat=1)
    seeds = {s.get("params", {}).get("seed") for s in _slots(server_env)}
    assert repeat_seed(7, "smollm", 1) in seeds  # the server's slots were given the repeat's own seed

    def answers(df):
        rows = df[(df.judge == "smollm") & (df.kind == "dimension")].sort_values(["sample_id", "dimension"])
        return list(zip(rows.score.fillna(-1), rows.rationale.fillna("")))

    assert answers(repeat) != answers(first)  # another draw, not the first answers again


def _slots(server) -> list[dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/slots", headers={"Authorization": f"Bearer {KEY}"}
    )
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.load(r)


def test_every_score_has_its_distribution_or_the_reason_it_has_none(server_env, rubrics, tmp_path):
    rubric = _with_judge(rubrics["npc_dialogue"], top_logprobs=5)
    df, _ = judge_samples(
        rubric, "c", _records("npc_dialogue", 4), Warehouse(str(tmp_path / "w.duckdb")), openai_judge()
    )
    ok = df[(df.judge == "smollm") & (df.kind == "dimension") & (df.status == "ok")]
    assert len(ok) > 0
    assert (ok.score_distribution.notna() | ok.distribution_note.notna()).all()
    read = ok[ok.expected_score.notna()]
    assert read.expected_score.between(1, 5).all() and (read.prob_on_scale >= 0.5).all()


def test_a_written_ten_on_a_one_to_ten_questionnaire_reads_near_ten(server_env, rubrics, tmp_path):
    """The questionnaire's first metric (10 items on the 1-10 scale; the reading is per item, so three metrics
    prove no more): an answer of 30 items took the small model minutes a call on a loaded machine, and CI's
    calls timed out (no item read)."""
    from eval_pipeline.core.config import RubricConfig

    raw = _with_judge(rubrics["roleplay_style"], top_logprobs=5).model_dump(mode="json")
    raw["questionnaire"]["metrics"] = raw["questionnaire"]["metrics"][:1]
    rubric = RubricConfig.model_validate(raw)  # a new object: its version (and prompts) are of what it holds
    df, _ = judge_samples(
        rubric, "c", _records("roleplay_style", 2), Warehouse(str(tmp_path / "w.duckdb")), openai_judge()
    )
    asked = df[(df.judge == "smollm") & (df.kind == "questionnaire_item")]
    assert len(asked) == 2 * 10, asked.dimension.unique()
    ok = asked[asked.status == "ok"]
    items = ok[ok.expected_score.notna()]
    # a written 1 is read too (what the model might have written after it says whether it was going on to 10)
    assert len(items) >= 0.8 * len(ok) > 0, (asked.reason.value_counts(), ok.distribution_note.value_counts())
    tens = items[items.chosen_score == 10]
    # 11-19 are off the scale: the mass after a written '1' that goes on with a digit is not the score 1
    assert (tens.expected_score >= 5.5).all(), tens[["dimension", "expected_score", "score_distribution"]]
    assert items.expected_score.between(1, 10).all()


def test_a_cut_off_answer_is_missing_with_its_reason_and_asked_again_only_with_more_room(server_env, rubrics, tmp_path):
    rubric = _with_judge(rubrics["npc_dialogue"], max_tokens=12)
    df, _ = judge_samples(
        rubric, "c", _records("npc_dialogue", 3), Warehouse(str(tmp_path / "w.duckdb")), openai_judge()
    )
    rows = df[(df.judge == "smollm") & (df.kind == "dimension")]
    assert (rows.status == "missing").all() and rows.score.isna().all()
    assert rows.reason.str.contains("asked again with 24 after a cut at 12").all(), rows.reason.unique()


def test_answer_schemas_are_bounded_where_the_server_enforces_them(server_env, rubrics, tmp_path):
    rubric = _with_judge(rubrics["roleplay_style"])
    wh = Warehouse(str(tmp_path / "w.duckdb"))
    rows, _ = extract(rubric, "c", _records("roleplay_style", 2), wh, openai_judge())
    assert (rows.status == "ok").any(), rows.reason.unique()
    for r in rows[rows.status == "ok"].itertuples():
        observations, items = json.loads(r.observations), json.loads(r.items)
        assert len(observations) <= OBSERVATIONS_MAX and len(items) <= rubric.extraction.max_items
        assert all(len(x) <= ITEM_MAX_CHARS for x in observations + items)
    answers = wh.query_df("SELECT answer_text FROM main.judge_cache WHERE answer_text IS NOT NULL")
    for text in answers.answer_text:
        answer = json.loads(text)
        for value in answer.get("observations", []) + answer.get("attributes", []):
            assert len(value) <= ITEM_MAX_CHARS  # as the server wrote it, before any clean-up of ours


def test_pass_through_options_reach_the_servers_slots(server_env, rubrics, tmp_path):
    rubric = _with_judge(rubrics["npc_dialogue"], extra_body={"top_k": 7, "repeat_penalty": 1.25})
    judge_samples(rubric, "c", _records("npc_dialogue", 1), Warehouse(str(tmp_path / "w.duckdb")), openai_judge())
    params = [s.get("params", {}) for s in _slots(server_env)]
    assert any(p.get("top_k") == 7 and p.get("repeat_penalty") == pytest.approx(1.25) for p in params), params


def test_make_demo_llm_judges_end_to_end_in_a_lake_of_its_own(tmp_path, llama_server):
    """`make demo-llm`'s command, on one rubric and two samples: the demo's whole flow with the local model as the
    judge, its results in data/llm_demo/ (never beside the offline judge's), and how to browse them."""
    shutil.copytree(RUBRIC_DIR, tmp_path / "rubric_configs")
    shutil.copytree(SAMPLE_CHECKPOINTS / "ckpt-0300", tmp_path / "data" / "checkpoints" / "ckpt-0300")
    (tmp_path / "data" / "human_ratings").mkdir()
    env = without_settings(dict(os.environ))
    cmd = [sys.executable, "-m", "eval_pipeline.devtools.llama", "demo", "--rubric", "kg_qa", "--samples", "2"]
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode in (0, 4), out[-3000:]  # 4: the small model left scores missing, said with reasons
    assert "judge: openai" in out and "ckpt-llm" in out and "the results: EVAL_WAREHOUSE=" in out
    lake = f"ducklake:sqlite:{tmp_path / 'data' / 'llm_demo' / 'lake' / 'catalog.sqlite'}"
    judged = Warehouse(lake, read_only=True).query_df(
        "SELECT DISTINCT model FROM kg_qa.judge_scores WHERE judge <> 'panel'"
    )
    assert judged.model.tolist() == [MODEL_NAME]
    assert not (tmp_path / "data" / "lake").exists()  # the offline demo's lake untouched (never made here)
    # #73: only the steps the demo shows (12:40 -> 4:17 for six samples of every rubric), and said so
    copy = yaml.safe_load((tmp_path / "data" / "llm_demo" / "rubrics" / "kg_qa.yaml").read_text())
    assert "repeat" not in copy and "examples" not in copy
    assert copy["dimensions"] == yaml.safe_load((RUBRIC_DIR / "kg_qa.yaml").read_text())["dimensions"]
    assert all(g["kind"] != "judge_repeatability" for g in copy["gates"])
    assert "a stand-in" in out and "without what this demo does not show" in out


def test_the_local_server_stopped_through_make_leaves_no_llama_server(llama_server, tmp_path):
    """`python -m eval_pipeline.devtools.llama serve` (what `make demo-llm` runs around the demo) stopped by a
    service manager: SIGTERM to the group and make's SIGTERM again at once. The llama-server runs in a session of its
    own, which neither reaches: the command must stop it, and a second signal must not cut that short."""
    import signal
    import uuid

    from tests.helpers.processes import processes_with
    from tests.helpers.waiting import poll

    mark = f"EVAL_TEST_MARK={uuid.uuid4().hex}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    cmd = [sys.executable, "-m", "eval_pipeline.devtools.llama", "serve", "--slots", "1"]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        assert "Ctrl-C stops it" in proc.stdout.readline()
        assert processes_with(mark, "llama-server")  # the server is up, in its own session
        os.killpg(proc.pid, signal.SIGTERM)
        os.kill(proc.pid, signal.SIGTERM)  # make's, landing while the first is handled
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out
    assert "Traceback" not in out, out
    poll(lambda: not processes_with(mark, "llama-server"), 5)
    assert not processes_with(mark, "llama-server")


def test_a_checkpoint_judged_through_a_batch_is_the_same_judge_online(server_env, rubrics, tmp_path):
    """#61: the local Batch API (devtools.stub_batches) answering each line with the llama.cpp server. The batch's
    answers are scores read as online answers are, and the same judge asked online afterwards finds every one in the
    cache (one identity, one key): the same rows, no call. (Two separate askings of llama.cpp are not compared:
    its answer to the same request can change with what its slots processed before, seen as 1 score in 20.)"""
    from eval_pipeline.devtools.openai_stub import StubServer
    from eval_pipeline.devtools.stub_answers import StubState
    from eval_pipeline.devtools.stub_batches import BatchDesk
    from eval_pipeline.judge import batch

    rubric = _with_judge(rubrics["npc_dialogue"], identity="smollm2-local")
    records = _records("npc_dialogue", 4)
    wh = Warehouse(str(tmp_path / "batch.duckdb"))
    with StubServer(state=StubState(desk=BatchDesk(upstream=server_env.base_url))) as stub:
        config = openai_judge(base_url=stub.base_url, call_mode="batch")
        with batch.for_step("c", "judge_scores"):
            first, _ = judge_samples(rubric, "c", records, wh, config)
            assert first[first.judge == "smollm"].reason.str.contains(batch.PENDING, regex=False).all()
            for _ in range(1200):
                if all(b["status"] == "completed" for b in stub.state.desk.batches.values()):
                    break
                time.sleep(0.5)
            done, _ = judge_samples(rubric, "c", records, wh, config)
        assert stub.state.requests == 0 and max(stub.state.desk.answered.values()) == 1
    ok = done[(done.judge == "smollm") & (done.kind == "dimension") & (done.status == "ok")]
    assert len(ok) > 0 and ok.score.between(1, 5).all()
    assert not done.reason.fillna("").str.contains(batch.PENDING, regex=False).any()
    online, stats = judge_samples(rubric, "c", records, wh, openai_judge())  # the server itself, online
    assert stats.calls == 0 and stats.cache_hits == stats.prompts

    def answers(df):
        rows = df[df.judge == "smollm"].sort_values(["sample_id", "dimension"])
        return list(zip(rows.sample_id, rows.dimension, rows.score.fillna(-1), rows.reason.fillna("")))

    assert answers(online) == answers(done)


def test_smollm2_is_aligned_on_one_dimension_end_to_end(server_env, rubrics, tmp_path):
    """#62: an alignment of SmolLM2 on npc_dialogue's dialogue_naturalness against the sample ratings: every
    candidate judged by the model over HTTP, the held-out share kept apart, and a repeat asks the model nothing."""
    from eval_pipeline.judge.align import HELD_OUT, Item, align

    raw = _with_judge(rubrics["npc_dialogue"]).model_dump(mode="json")
    raw["align"] = {"instructions": ["Judge only how natural the NPC's line sounds when spoken aloud."],
                    "few_shot": [0], "folds": 2, "holdout_share": 0.35}  # fmt: skip
    from eval_pipeline.core.config import RubricConfig

    rubric = RubricConfig.model_validate(raw)
    ratings = pd.read_csv(RUBRIC_DIR.parent / "data" / "human_ratings" / "npc_dialogue" / "ckpt-0300.csv")
    people = ratings.groupby("sample_id").dialogue_naturalness.mean()
    records = []
    for line in (SAMPLE_CHECKPOINTS / "ckpt-0300" / "npc_dialogue.jsonl").read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # the sample data's bad lines, on purpose
        if isinstance(row, dict) and row.get("sample_id") in people.index and isinstance(row.get("response"), str):
            records.append(row)
    records = records[:13]  # 8 to tune on, 5 held out: the least an alignment takes
    items = [Item("ckpt-0300", r["sample_id"], {"dialogue_naturalness": float(people[r["sample_id"]])}, "", r)
             for r in records]  # fmt: skip
    wh = Warehouse(str(tmp_path / "w.duckdb"))
    started = time.perf_counter()
    a = align(rubric, openai_judge(), wh, items, ["dialogue_naturalness"])
    seconds = time.perf_counter() - started
    assert [t.label for t in a.tried][0] == "the current judge" and len(a.tried) == 2
    assert a.calls >= 2 * 8 and a.stopped
    held = {i.key for i, role, _ in a.items if role == HELD_OUT}
    assert len(held) == 5 and not held & set(a.overlay.get("aligned", {}).get("tuned_on", []))
    assert a.gain_low <= a.gain <= a.gain_high and a.verdict
    again = align(rubric, openai_judge(), wh, items, ["dialogue_naturalness"])
    assert again.calls == 0 and again.id == a.id  # every answer came from the cache
    print(f"aligned SmolLM2 in {seconds:.0f} s, {a.calls} calls: {a.verdict}")
