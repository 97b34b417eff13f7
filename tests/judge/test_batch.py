"""Judging through the provider's Batch API (judge.batch) against the local OpenAI-protocol server's Files and
Batches API (devtools.stub_batches): the same tables as online, pending while a batch works, resumable at every
point without a prompt sent twice, partial and failed batches, the budget, and the key redacted."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from eval_pipeline.defs.batch_sensor import SENSOR
from eval_pipeline.defs.build import build_definitions
from eval_pipeline.devtools.openai_stub import StubServer
from eval_pipeline.runtime.runner import materialize_checkpoints
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR
from tests.helpers.automation import AutomationSensor, partition_run
from tests.helpers.lakes import contents, differences

RUBRIC = "empathetic_dialogue"


def _env(monkeypatch, stub, mode):
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-batch-NOTLOGGED4242")
    monkeypatch.setenv("EVAL_JUDGE", "openai")
    monkeypatch.setenv("EVAL_JUDGE_MODE", mode)


def _run(warehouse_path, checkpoint_root, instance, ckpts=("ckpt-0100",)):
    defs = build_definitions(RUBRIC_DIR, warehouse_path, str(checkpoint_root))
    outcomes = materialize_checkpoints(defs, instance, list(ckpts), rubrics={RUBRIC})
    assert all(o.success for o in outcomes), [o.failures for o in outcomes]
    return defs


def _verdict(warehouse_path, ckpt="ckpt-0100"):
    wh = Warehouse(warehouse_path)
    return wh.query_rows(f"SELECT verdict, reasons FROM {RUBRIC}.verdict WHERE checkpoint_id = ?", [ckpt])[0]


@pytest.mark.slow
def test_a_checkpoint_judged_in_batch_mode_pends_then_equals_the_online_run(
    checkpoint_root, tmp_path, instance, monkeypatch
):
    online_lake = f"ducklake:sqlite:{tmp_path / 'online' / 'catalog.sqlite'}"
    batch_lake = f"ducklake:sqlite:{tmp_path / 'batch' / 'catalog.sqlite'}"
    with StubServer() as stub, dg.instance_for_test() as batch_instance:  # one endpoint: the same judge
        _env(monkeypatch, stub, "online")
        _run(online_lake, checkpoint_root, instance)
        online_calls = stub.state.requests
        stub.state.reset_counts()
        _env(monkeypatch, stub, "batch")
        _run(batch_lake, checkpoint_root, batch_instance)
        verdict, reasons = _verdict(batch_lake)
        assert verdict == "pending judge", reasons
        assert "judge batch" in reasons and "of" in reasons
        assert stub.state.requests == 0  # no online call
        # from here on the batch sensor alone: it asks how the batches stand, requests a run of what waits on the
        # ended ones, and the automation sensor then brings the assets over every checkpoint up to date
        defs = build_definitions(RUBRIC_DIR, batch_lake, str(checkpoint_root))
        automation = AutomationSensor(defs, batch_instance)
        sensor = defs.get_sensor_def(SENSOR)
        runs = 0
        for _ in range(6):
            _wait_ended(stub)
            result = sensor(dg.build_sensor_context(instance=batch_instance, definitions=defs))
            requests = result.run_requests if isinstance(result, dg.SensorResult) else []
            if not requests:
                break
            for req in requests:
                assert req.partition_key == "ckpt-0100" and dg.AssetKey([RUBRIC, "verdict"]) in req.asset_selection
                partition_run(defs, batch_instance, req.partition_key, dg.AssetSelection.assets(*req.asset_selection))
                runs += 1
            automation.settle()
        assert 1 <= runs <= 3  # the first answers, then the judge steps' later batches (a repeat of an answer)
        assert automation.runs == 0  # each run took up its decisions too: nothing left for the automation
        assert _verdict(batch_lake)[0] != "pending judge"
        assert stub.state.requests == 0
        answered = stub.state.desk.answered
        assert answered and max(answered.values()) == 1  # no prompt answered twice
        assert sum(answered.values()) == online_calls
    # how each answer reached the table (read from a batch in one run, from the cache in the next) is per run
    volatile = ["run_id", "latency_ms", "created_at", "updated_at", "snapshot", "wall_s", "cached", "attempts"]
    a = contents(Warehouse(online_lake))
    b = contents(Warehouse(batch_lake))
    for d in (a, b):
        for name in list(d):
            if "judge_batch" in name or "judge_usage" in name:
                d.pop(name)
            else:
                d[name] = d[name].drop(columns=[c for c in volatile if c in d[name].columns])
    assert differences(a, b) == []


def _wait_ended(stub, timeout_s=30.0, none_ok=False):
    import time

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        with stub.state.desk.lock:
            states = [b["status"] for b in stub.state.desk.batches.values()]
        if (states or none_ok) and all(s in ("completed", "failed", "expired", "cancelled") for s in states):
            return
        time.sleep(0.05)
    raise AssertionError(f"batches still working: {states}")


# ---- a process judging in batch mode, killed and run again -----------------------------------------------------

SMALL = "empathetic_dialogue"
N = 8  # samples of the checkpoint judged by the helper process: 8 prompts


def _judge(stub, lake, kill=None, env_more=None):
    """One run of tests/helpers/batch_judge.py; with ``kill`` = (route, when) it is SIGKILLed there. Its JSON
    summary, or None when it was killed."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY=KEY, **(env_more or {}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.batch_judge", lake, SMALL, str(N)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if kill is not None:
        stub.state.desk.kill = (*kill, proc.pid)
    out, err = proc.communicate(timeout=120)
    if proc.returncode == -9:
        return None
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _until_final(stub, lake, rounds=6):
    for _ in range(rounds):
        _wait_ended(stub, none_ok=True)
        got = _judge(stub, lake)
        if not got["pending"]:
            return got
    raise AssertionError(f"still pending after {rounds} runs: {got}")


KEY = "sk-batch-NOTLOGGED4242"
KILLS = [
    ("POST /v1/files", "before"),  # recorded, nothing uploaded
    ("POST /v1/files", "after"),  # uploaded, its answer lost
    ("POST /v1/batches", "before"),  # uploaded and recorded, no batch
    ("POST /v1/batches", "after"),  # created, its answer lost
    ("GET /v1/batches/{id}", "after"),  # the next run, asking how the batch stands
    ("GET /v1/files/{id}/content", "before"),  # the batch ended: before its results come
    ("GET /v1/files/{id}/content", "during"),  # part-way through the download
    ("GET /v1/files/{id}/content", "after"),  # the results read, before the cache and the record are written
    ("GET /v1/files", "after"),  # resuming a lost upload: while looking for the file
    ("GET /v1/batches", "after"),  # resuming a lost creation: while looking for the batch
]


@pytest.mark.slow
@pytest.mark.parametrize("route,when", KILLS, ids=[f"{r}-{w}" for r, w in KILLS])
def test_killed_at_any_point_and_run_again_no_prompt_is_sent_twice(tmp_path, route, when):
    lake = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    with StubServer() as stub:
        if route in ("GET /v1/files", "GET /v1/batches"):  # the resume looks for what the killed run sent
            first = ("POST /v1/files", "after") if route == "GET /v1/files" else ("POST /v1/batches", "after")
            assert _judge(stub, lake, kill=first) is None
        elif route in ("GET /v1/batches/{id}",) or route.startswith("GET /v1/files/{id}"):
            got = _judge(stub, lake)
            assert got["pending"] > 0 and got["ok"] == 0
            _wait_ended(stub)
        assert _judge(stub, lake, kill=(route, when)) is None, f"the process was not killed at {route} {when}"
        got = _until_final(stub, lake)
        desk = stub.state.desk
        assert got["ok"] > 0 and got["missing"] == 0, got
        assert desk.answered and max(desk.answered.values()) == 1, desk.answered  # each prompt answered once
        assert stub.state.requests == 0  # never online
        assert len(desk.batches) == 1  # one batch: nothing submitted twice
        wh = Warehouse(lake)
        keys = wh.query_rows("SELECT count(*), count(DISTINCT cache_key) FROM main.judge_cache")[0]
        assert keys[0] == keys[1] == len(desk.answered)  # every answer in the cache, none twice
        lines = wh.query_rows("SELECT count(*), count(DISTINCT custom_id) FROM main.judge_batch_lines")[0]
        assert lines[0] == lines[1] == len(desk.answered)
        states = wh.query_rows("SELECT DISTINCT state FROM main.judge_batches")
        assert states == [("collected",)]


# ---- batches that do not answer everything ----------------------------------------------------------------------


def _lake(tmp_path):
    return f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"


@pytest.mark.slow
def test_a_failed_line_is_asked_again_once_then_missing_with_its_reason(tmp_path):
    lake = _lake(tmp_path)
    with StubServer() as stub:
        stub.state.desk.fail_marker = json.loads(_sample_line(1))["user_statement"][:40]  # one prompt refused
        assert _judge(stub, lake)["pending"] == N
        got = _until_final(stub, lake)
        assert got["missing"] == 1 and got["ok"] == N - 1, got
        reasons = Warehouse(lake).query_rows(
            "SELECT round, state, reason FROM main.judge_batch_lines WHERE state = 'failed'"
        )
        assert reasons and all(r[0] == 2 and "this line is refused" in r[2] for r in reasons), reasons
        assert len(stub.state.desk.batches) == 2  # the first, and one with the second asks


def _sample_line(i=1):
    """The checkpoint's ``i``-th line (the first is the rubric's own worked example: in every prompt)."""
    from tests.conftest import SAMPLE_CHECKPOINTS

    return (SAMPLE_CHECKPOINTS / "ckpt-0100" / f"{SMALL}.jsonl").read_text().splitlines()[i]


@pytest.mark.slow
def test_an_expired_batch_keeps_its_half_and_asks_the_rest_again(tmp_path):
    lake = _lake(tmp_path)
    with StubServer() as stub:
        stub.state.desk.expire_after = N // 2
        _judge(stub, lake)
        _wait_ended(stub)
        stub.state.desk.expire_after = None
        got = _until_final(stub, lake)
        assert got["missing"] == 0 and got["ok"] > 0
        desk = stub.state.desk
        assert max(desk.answered.values()) == 1 and len(desk.batches) == 2
        rounds = Warehouse(lake).query_rows("SELECT round, count(*) FROM main.judge_batch_lines GROUP BY 1 ORDER BY 1")
        assert rounds == [(1, N), (2, N - N // 2)], rounds


@pytest.mark.slow
def test_a_cancelled_batch_keeps_what_came_back(tmp_path):
    from eval_pipeline.cli.app import main as cli

    lake = _lake(tmp_path)
    with StubServer() as stub:
        stub.state.desk.line_s = 3.0  # slow enough to cancel part-way, however loaded the machine
        _judge(stub, lake)
        bid = next(iter(stub.state.desk.batches))
        import os
        import time

        t0 = time.monotonic()
        while stub.state.desk.batches[bid]["request_counts"]["completed"] < 1 and time.monotonic() - t0 < 60:
            time.sleep(0.1)
        os.environ["OPENAI_API_KEY"], os.environ["OPENAI_BASE_URL"] = KEY, stub.base_url
        try:
            assert cli(["batches", "cancel", bid, "--warehouse", lake]) == 0
        finally:
            del os.environ["OPENAI_API_KEY"], os.environ["OPENAI_BASE_URL"]
        _wait_ended(stub)
        assert stub.state.desk.batches[bid]["status"] == "cancelled"
        stub.state.desk.line_s = 0.0
        got = _until_final(stub, lake)
        assert got["missing"] == 0
        assert max(stub.state.desk.answered.values()) == 1


@pytest.mark.slow
def test_the_budget_is_reserved_at_submission_and_nothing_past_it_is_sent(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: USD\nbatch_discount: 0.5\nmodels:\n  gpt-4o-mini: {input: 100, output: 100}\n")
    lake = _lake(tmp_path)
    with StubServer() as stub:
        # each prompt reserves (its bytes + max_tokens) * 100 / 1e6 at half price, under 1: a budget of 3 covers a few
        got = _judge(stub, lake, env_more={"EVAL_PRICES": str(prices), "EVAL_JUDGE_BUDGET": "3"})
        assert 0 < got["pending"] < N and got["missing"] == N - got["pending"], got
        sent = sum(b["request_counts"]["total"] for b in stub.state.desk.batches.values())
        assert sent == got["pending"]
        reserved = Warehouse(lake).query_rows("SELECT reserved_cost FROM main.judge_batches")[0][0]
        assert 0 < reserved <= 3


@pytest.mark.slow
def test_the_key_is_redacted_from_everything_a_batch_returns(tmp_path):
    lake = _lake(tmp_path)
    with StubServer() as stub:
        marker = json.loads(_sample_line())["user_statement"][:40]
        stub.state.fault_when = {marker: "key_plain"}  # the answer's text echoes the key (a hostile endpoint)
        stub.state.desk.fail_marker = None
        _judge(stub, lake)
        _until_final(stub, lake)
        wh = Warehouse(lake)
        found = []
        with wh.session() as s:
            for schema, table in s.tables():
                for (col,) in [(c,) for c in s.columns(schema, table)]:
                    n = s.query_rows(
                        f'SELECT count(*) FROM "{schema}"."{table}" WHERE CAST("{col}" AS VARCHAR) LIKE ?', [f"%{KEY}%"]
                    )
                    if n[0][0]:
                        found.append(f"{schema}.{table}.{col}")
        assert found == []
        echoed = [f for f in stub.state.desk.files.values() if KEY.encode() in f["data"]]
        assert echoed, "the endpoint never echoed the key: the test tests nothing"


@pytest.mark.slow
def test_the_key_a_provider_echoes_in_its_errors_is_stored_and_printed_nowhere(tmp_path):
    """#73: a hostile provider echoes the request's key in a failed line's error code and message, and in a failed
    batch's ``errors.data`` (code, message, param): no table of the lake holds it, and neither does what `eval-pipeline
    batches` prints."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).with_name("eval-pipeline"))
    lake, second = _lake(tmp_path), _lake(tmp_path / "second")
    with StubServer() as stub:
        stub.state.desk.echo_key = True
        stub.state.desk.fail_marker = json.loads(_sample_line())["user_statement"][:40]  # one line refused
        _judge(stub, lake)
        _until_final(stub, lake)
        stub.state.desk.fail_validation = True  # then a batch the provider fails whole
        _judge(stub, second)
        _wait_ended(stub)
        _judge(stub, second)  # its failure read
        errors = [b["errors"] for b in stub.state.desk.batches.values() if b.get("errors")]
        assert errors and KEY in json.dumps(errors), "the provider never echoed the key: the test tests nothing"
        refused = [f for f in stub.state.desk.files.values() if f["meta"]["filename"].endswith("_error.jsonl")]
        assert any(KEY.encode() in f["data"] for f in refused), "no error line echoed the key"
        for where in (lake, second):
            assert _cells_holding(Warehouse(where), KEY) == []
            env = dict(os.environ, EVAL_WAREHOUSE=where, OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY=KEY)
            shown = subprocess.run([exe, "batches"], env=env, capture_output=True, text=True, timeout=120)
            assert KEY not in shown.stdout + shown.stderr and shown.returncode == 0, shown.stderr[-300:]


@pytest.mark.slow
def test_a_result_file_that_never_ends_is_read_to_a_bound_and_its_prompts_are_not_lost(tmp_path):
    """#73: a provider whose result file never ends (lines no prompt asked for, sent without end) hung the run (the
    only bound was 64 GiB). The file is read to a bound set by the prompts asked (``FileBound.asked``), the run
    ends, and each unread prompt says why it has no answer."""
    import time

    lake = _lake(tmp_path)
    with StubServer() as stub:
        stub.state.desk.endless = True
        got = _judge(stub, lake)
        assert got["pending"] > 0
        _wait_ended(stub)
        started = time.monotonic()
        _judge(stub, lake)  # reads the endless files: bounded
        assert time.monotonic() - started < 60
        reasons = [r for (r,) in Warehouse(lake).query_rows("SELECT reason FROM main.judge_batch_lines")]
        assert reasons and any("went on past" in str(r) for r in reasons), reasons[:3]


@pytest.mark.slow
def test_a_result_file_the_provider_no_longer_has_asks_its_prompts_again(tmp_path):
    """#73: a completed batch whose output file answers 404 failed the run (exit 1). Its prompts are unanswered,
    asked again with the reason, and answered by the second batch."""
    lake = _lake(tmp_path)
    with StubServer() as stub:
        desk = stub.state.desk
        first = _judge(stub, lake)
        assert first["pending"] == N
        _wait_ended(stub)
        with desk.lock:  # the provider loses the batch's output file
            (batch,) = desk.batches.values()
            del desk.files[batch["output_file_id"]]
        again = _judge(stub, lake)  # did not fail: its prompts are in a second batch
        assert again["pending"] > 0 and len(desk.batches) == 2, again
        got = _until_final(stub, lake)
        assert got["ok"] == N and got["missing"] == 0, got
        reasons = [str(r) for (r,) in Warehouse(lake).query_rows("SELECT reason FROM main.judge_batch_lines")]
        assert any("no longer has the result file" in r for r in reasons), reasons[:3]


@pytest.mark.slow
def test_one_404_is_not_a_lost_batch_and_a_lost_one_is_said_after_three_looks(tmp_path):
    """#73: one 404 on a batch marked it lost and its prompts were submitted and paid again while the first batch
    completed. A batch the provider's GET does not find is looked for in its list; one it finds nowhere stays
    waited on, and is lost (its prompts asked again) only at ``LOST_LOOKS`` looks in a row."""
    flicker, lost = _lake(tmp_path / "flicker"), _lake(tmp_path / "lost")
    with StubServer() as stub:
        desk = stub.state.desk
        _judge(stub, flicker)
        _wait_ended(stub)
        desk.flicker = 1  # the next GET of the batch answers 404; the list still holds it
        got = _until_final(stub, flicker)
        assert got["ok"] == N and len(desk.batches) == 1 and max(desk.answered.values()) == 1, got
    from eval_pipeline.judge.batch import LOST_LOOKS

    with StubServer() as stub:
        desk = stub.state.desk
        _judge(stub, lost)
        _wait_ended(stub)
        desk.lose = True  # the provider finds the batch nowhere, by id or in its list
        for look in range(1, LOST_LOOKS):
            got = _judge(stub, lost)
            assert got["pending"] == N and len(desk.batches) == 1, (look, got, dict(desk.routes))
            (reason,) = Warehouse(lost).query_rows("SELECT reason FROM main.judge_batches")[0]
            assert f"({look} of {LOST_LOOKS} looks" in reason, reason
        again = _judge(stub, lost)  # the last look: lost, its prompts sent again
        assert again["pending"] == N and len(desk.batches) == 2, again
        states = Warehouse(lost).query_rows("SELECT state, reason FROM main.judge_batches ORDER BY created_at")
        assert states[0][1].startswith("lost: ") and f"({LOST_LOOKS} of {LOST_LOOKS} looks" in states[0][1], states
        desk.lose = False
        assert _until_final(stub, lost)["ok"] == N


@pytest.mark.slow
def test_a_provider_that_keeps_no_metadata_is_not_paid_twice_after_a_kill(tmp_path):
    """#73: with a provider that keeps no batch metadata, a process killed right after creating its batch sent it
    again on resuming (a dozen prompts paid twice). The batch is found by its input file."""
    lake = _lake(tmp_path)
    with StubServer() as stub:
        stub.state.desk.keep_metadata = False
        assert _judge(stub, lake, kill=("POST /v1/batches", "after")) is None
        got = _until_final(stub, lake)
        desk = stub.state.desk
        assert got["ok"] == N and len(desk.batches) == 1 and max(desk.answered.values()) == 1, (got, desk.answered)


@pytest.mark.slow
def test_a_batch_id_that_is_not_an_id_is_stored_and_printed_nowhere(tmp_path):
    """#73 (low): provider batch ids were stored and printed raw (escape sequences, carriage returns, a 100,000-
    character id; a key in one would be stored). An id that is not one ends its batch as failed with the reason,
    its prompts are missing with it after their second ask, and nothing of the id is stored or printed."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    lake = _lake(tmp_path)
    with StubServer() as stub:
        stub.state.desk.odd_ids = True
        got = _until_final(stub, lake)
        assert got["missing"] == N and "not an id" in " ".join(got["reasons"]), got
        wh = Warehouse(lake)
        assert _cells_holding(wh, KEY) == [] and _cells_holding(wh, "\x1b") == []
        env = dict(os.environ, EVAL_WAREHOUSE=lake, OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY=KEY)
        exe = str(Path(sys.executable).with_name("eval-pipeline"))
        shown = subprocess.run([exe, "batches", "--all"], env=env, capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0 and KEY not in shown.stdout + shown.stderr, shown.stderr[-300:]
        assert "\x1b" not in shown.stdout and "\r" not in shown.stdout
        assert max(map(len, shown.stdout.splitlines())) < 200


@pytest.mark.slow
def test_a_prompt_answered_twice_differently_takes_neither_answer(tmp_path):
    """#73 (low): a repeated ``custom_id`` in a result file silently took the first line. Two different answers to
    one prompt take neither: the prompt is asked again with the reason, and answered by the second batch."""
    lake = _lake(tmp_path)
    with StubServer() as stub:
        stub.state.desk.twice = True
        _judge(stub, lake)
        _wait_ended(stub)
        stub.state.desk.twice = False
        again = _judge(stub, lake)
        assert again["pending"] == N and len(stub.state.desk.batches) == 2, again
        got = _until_final(stub, lake)
        assert got["ok"] == N, got
        reasons = [str(r) for (r,) in Warehouse(lake).query_rows("SELECT reason FROM main.judge_batch_lines")]
        assert any("answered this prompt twice" in r for r in reasons), reasons[:3]


def test_batches_show_with_the_endpoint_down_names_it_in_one_line(tmp_path, monkeypatch, capsys):
    """#73 (low): with the provider down `batches show` said only "Connection error.". It names the endpoint."""
    import socket

    from eval_pipeline.cli.app import main as cli
    from eval_pipeline.judge.batch import records

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    lake = _lake(tmp_path)
    sub = {"submission_id": "s1", "batch_id": "batch-1", "state": "in_progress", "rubric": SMALL, "requests": 1,
           "checkpoint_id": "ckpt-0100", "step": "judge_scores", "base_url": dead, "created_at": records.now(),
           "completed": 0, "failed": 0, "round": 1, "prompt_tokens": 0, "completion_tokens": 0}  # fmt: skip
    records.record(Warehouse(lake), sub, [{"submission_id": "s1", "custom_id": "k", "round": 1, "state": "submitted",
                                           "max_tokens": 10, "cut_at": 0, "reason": None}])  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert cli(["batches", "show", "batch-1", "--warehouse", lake]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and dead in err[0] and "did not answer" in err[0], err


def test_batches_lists_how_the_provider_says_a_batch_stands_now(tmp_path):
    """#73: `eval-pipeline batches` showed the state recorded at submission ("in progress", 0 done) for a batch the
    provider had finished. The open batches' states and counts are asked (one list request per endpoint)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    lake = _lake(tmp_path)
    with StubServer() as stub:
        _judge(stub, lake)
        _wait_ended(stub)
        env = dict(os.environ, EVAL_WAREHOUSE=lake, OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY=KEY)
        exe = str(Path(sys.executable).with_name("eval-pipeline"))
        shown = subprocess.run([exe, "batches"], env=env, capture_output=True, text=True, timeout=120)
    (row,) = [ln for ln in shown.stdout.splitlines() if ln.startswith("batch-")]
    assert row.split()[1:3] == ["completed", f"{N}/{N}"], shown.stdout


def _cells_holding(wh: Warehouse, text: str) -> list[str]:
    found = []
    with wh.session() as s:
        for schema, table in s.tables():
            for col in s.columns(schema, table):
                n = s.query_rows(
                    f'SELECT count(*) FROM "{schema}"."{table}" WHERE CAST("{col}" AS VARCHAR) LIKE ?', [f"%{text}%"]
                )
                if n[0][0]:
                    found.append(f"{schema}.{table}.{col}")
    return found


@pytest.mark.slow
def test_the_sensor_reports_a_working_batch_once_per_change_and_requests_nothing(tmp_path, checkpoint_root):
    lake = _lake(tmp_path)
    with StubServer() as stub, dg.instance_for_test() as instance:
        stub.state.desk.validate_s = 30  # the batch stays validating while the sensor looks
        _judge(stub, lake)
        defs = build_definitions(RUBRIC_DIR, lake, str(checkpoint_root))
        sensor = defs.get_sensor_def(SENSOR)
        first = sensor(dg.build_sensor_context(instance=instance, definitions=defs))
        assert isinstance(first, dg.SensorResult) and not first.run_requests
        (event,) = first.asset_events
        assert event.asset_key == dg.AssetKey([SMALL, "judge_scores"]) and event.partition == "ckpt-0100"
        assert f"judge batch {next(iter(stub.state.desk.batches))} in progress (0 of {N} done)" in str(event.metadata)
        again = sensor(dg.build_sensor_context(instance=instance, definitions=defs, cursor=first.cursor))
        assert isinstance(again, dg.SkipReason) and "working" in again.skip_message


@pytest.mark.slow
def test_run_submits_and_exits_7_then_wait_finishes_with_the_online_code(tmp_path):
    """`eval-pipeline run` in batch mode submits, says the checkpoint is pending and exits 7; `run --wait` waits for
    the batches and ends with the code the online run gives, its verdict no longer pending."""
    import os
    import subprocess

    cli, args = _cli()
    with StubServer() as stub:
        base = dict(os.environ, EVAL_JUDGE="openai", OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY=KEY)
        online = subprocess.run(
            args, env={**base, **_project(tmp_path, "online")}, capture_output=True, text=True, timeout=600
        )
        batch_env = {**base, **_project(tmp_path, "batch"), "EVAL_JUDGE_MODE": "batch", "EVAL_JUDGE_BATCH_POLL": "1"}
        first = subprocess.run(args, env=batch_env, capture_output=True, text=True, timeout=600)
        assert first.returncode == 7, first.stdout[-2000:] + first.stderr[-2000:]
        assert "PENDING JUDGE" in first.stdout and "judge batch" in first.stdout
        waited = subprocess.run([*args, "--wait"], env=batch_env, capture_output=True, text=True, timeout=600)
        listed = subprocess.run([cli, "batches", "--all"], env=batch_env, capture_output=True, text=True, timeout=60)
    assert online.returncode != 7
    assert waited.returncode == online.returncode, waited.stdout[-3000:] + waited.stderr[-2000:]
    assert "PENDING" not in waited.stdout.split("\n")[-3:]
    assert listed.returncode == 0 and "collected" in listed.stdout and KEY not in listed.stdout + waited.stdout


def _project(tmp_path, name):
    """A project of its own (instance, lake, checkpoint folder with ckpt-0100's SMALL file) as environment."""
    import shutil

    from tests.conftest import ROOT, SAMPLE_CHECKPOINTS

    home = tmp_path / name / "home"
    home.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    ckpt = tmp_path / name / "checkpoints" / "ckpt-0100"
    ckpt.mkdir(parents=True)
    for f in (f"{SMALL}.jsonl", "checkpoint.json"):
        shutil.copy(SAMPLE_CHECKPOINTS / "ckpt-0100" / f, ckpt / f)
    return dict(
        DAGSTER_HOME=str(home),
        EVAL_WAREHOUSE=f"ducklake:sqlite:{tmp_path / name / 'lake' / 'catalog.sqlite'}",
        EVAL_CHECKPOINT_DIR=str(ckpt.parent),
        EVAL_REPORT_DIR=str(tmp_path / name / "reports"),
        EVAL_WORKLIST_DIR=str(tmp_path / name / "wl"),
    )


def _cli():
    from tests.conftest import ROOT

    cli = str(ROOT / ".venv" / "bin" / "eval-pipeline") if (ROOT / ".venv").exists() else "eval-pipeline"
    return cli, [cli, "run", "--checkpoint", "ckpt-0100", "--rubric", SMALL]


@pytest.mark.slow
def test_run_wait_draws_every_evaluation_on_one_budget_and_ends(tmp_path):
    """#73: `run --wait` spent past EVAL_JUDGE_BUDGET (each re-evaluation started a fresh budget: 219 reserved on a
    budget of 110), and from a fresh lake it never ended (its second evaluation's verdicts were read from the first's,
    still pending). The command's runs draw on one budget; it ends with the stored verdict, the checkpoint counted
    once."""
    import os
    import subprocess

    cli, args = _cli()
    project = _project(tmp_path, "p")
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: USD\nbatch_discount: 0.5\nmodels:\n  gpt-4o-mini: {input: 100, output: 100}\n")
    budget = 60.0  # the first evaluation's batches reserve ~60, what follows (a repeat's batch) ~14 more
    with StubServer() as stub:
        env = dict(
            os.environ,
            **project,
            EVAL_JUDGE="openai",
            OPENAI_BASE_URL=stub.base_url,
            OPENAI_API_KEY=KEY,
            EVAL_JUDGE_MODE="batch",
            EVAL_JUDGE_BATCH_POLL="1",
            EVAL_PRICES=str(prices),
            EVAL_JUDGE_BUDGET=str(budget),
        )
        waited = subprocess.run([*args, "--wait"], env=env, capture_output=True, text=True, timeout=300)
    assert waited.returncode in (3, 4), waited.stdout[-3000:] + waited.stderr[-2000:]
    wh = Warehouse(project["EVAL_WAREHOUSE"])
    reserved, batches = wh.query_rows("SELECT sum(reserved_cost), count(*) FROM main.judge_batches")[0]
    assert batches >= 2 and 0 < reserved <= budget, (reserved, batches)
    (verdict,) = wh.query_rows(f"SELECT verdict FROM {SMALL}.verdict")[0]
    assert verdict != "pending judge" and "PENDING JUDGE" not in waited.stdout.splitlines()[-1], waited.stdout[-2000:]


def test_the_stub_answers_a_new_batch_as_created_even_when_its_work_ran_first(monkeypatch):
    """A provider answers a new batch as it was created ("validating"). The stub's worker thread could finish a
    batch of no delays before the answer was written (a loaded machine): the first call then collected it, and a
    test that needed it pending failed in a clean clone. Here the work runs to its end before the answer."""
    import threading

    import openai

    from eval_pipeline.devtools import stub_batches

    class Eager(threading.Thread):
        def start(self) -> None:
            self.run()  # the worker done before the creating request is answered

    import types

    monkeypatch.setattr(stub_batches, "threading", types.SimpleNamespace(Thread=Eager))  # the batches' threads only
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}  # fmt: skip
    with StubServer() as stub:
        client = openai.OpenAI(base_url=stub.base_url, api_key=KEY)
        uploaded = client.files.create(file=("in.jsonl", json.dumps(line).encode()), purpose="batch")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert batch.status == "validating" and batch.output_file_id is None
        assert client.batches.retrieve(batch.id).status == "completed"  # its work did run
