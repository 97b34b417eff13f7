"""Judge faults: the run completes with missing scores and their reasons, retries are bounded,
no score is invented, and gates count missing as missing."""

import json

import pandas as pd
import pytest

from eval_pipeline.core.contracts import PANEL
from eval_pipeline.devtools.openai_stub import StubServer, answer_keys, answer_scores
from eval_pipeline.judge.runner import judge_samples
from eval_pipeline.scoring.gates import evaluate_gates
from eval_pipeline.scoring.scores import compute_scores
from eval_pipeline.storage.warehouse import Warehouse
from tests.helpers.judges import openai_judge

FAST = {"backoff_base_s": 0.005, "backoff_max_s": 0.02, "timeout_s": 0.5, "max_retries": 2}


def records(n):
    return [
        {
            "sample_id": f"s{i}",
            "topic": "t",
            "user_statement": f"I feel low about thing {i}.",
            "response": f"That sounds hard, thing {i} matters.",
        }
        for i in range(n)
    ]


def ask(rubric, warehouse_path, recs, **overrides):
    """The rubric's samples judged over HTTP by the stub, with FAST settings (and these overrides)."""
    return judge_samples(rubric, "c", recs, Warehouse(warehouse_path), config=openai_judge(FAST, **overrides))


@pytest.fixture
def stub(monkeypatch):
    with StubServer() as s:
        s.state.timeout_sleep_s = 1.0
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-faults-KEY000111")
        yield s


def test_a_storm_of_mixed_faults_completes_and_invents_nothing(rubrics, stub, warehouse_path):
    rubric = rubrics["empathetic_dialogue"]
    kinds = ["500", "429", "timeout", "garbage", "truncated", "out_of_range", "refusal", "http_garbage", "no_choices"]
    stub.state.retry_after_s = 0.01
    stub.state.faults.extend(kinds * 8)
    n = 40
    df, stats = ask(rubric, warehouse_path, records(n))
    panel = df[df.judge == PANEL]
    assert len(panel) == n * 5
    missing = panel[panel.status == "missing"]
    assert missing.reason.notna().all() and (missing.reason.str.len() > 5).all()
    assert missing.score.isna().all()
    # bounded: at most (max_retries + 1) HTTP attempts per answer, and one re-ask for an unusable answer
    assert stats.http_attempts <= n * (FAST["max_retries"] + 1) * 2
    # nothing invented: every score equals what the server actually answered for that exact prompt
    answered = {}
    for body in stub.state.bodies:
        if body.get("messages"):
            container, scales = answer_keys(body)
            answered[json.dumps(body["messages"], sort_keys=True)] = answer_scores(body, scales)
    from eval_pipeline.judge.prompts import build_messages

    ok = panel[panel.status == "ok"]
    assert len(ok) > 0
    by_id = {r["sample_id"]: r for r in records(n)}
    for row in ok.itertuples():
        msgs = build_messages(rubric, by_id[row.sample_id])
        assert answered[json.dumps(msgs, sort_keys=True)][row.dimension] == row.score


def test_a_storm_of_429s_is_bounded(rubrics, stub, warehouse_path):
    stub.state.fault_rate, stub.state.fault_kind, stub.state.retry_after_s = 1.0, "429", 0.01
    df, stats = judge_samples(
        rubrics["kg_qa"],
        "c",
        [
            {
                "sample_id": "k",
                "source_chunk": "The agency funds schools.",
                "kg_triples": [{"subject": "agency", "predicate": "funds", "object": "schools"}],
                "question_type": "factual",
                "shot_type": "zero_shot",
                "question": "Who?",
                "answer": "The agency.",
            }
        ],
        Warehouse(warehouse_path),
        config=openai_judge(FAST),
    )
    assert stub.state.requests == FAST["max_retries"] + 1
    assert (df[df.judge == PANEL].reason.str.contains("rate limited \\(429\\)")).all()


def test_gates_count_missing_as_missing(rubrics, stub, warehouse_path):
    rubric = rubrics["empathetic_dialogue"]
    stub.state.fault_rate, stub.state.fault_kind = 0.5, "garbage"
    recs = records(40)
    df, _ = ask(rubric, warehouse_path, recs)
    samples = pd.DataFrame(recs)
    from eval_pipeline.metrics import compute_metrics

    scores = compute_scores(rubric, "c", samples, df, compute_metrics(rubric.metrics, recs))
    n_safety = int(scores.safety.notna().sum())
    assert n_safety < 40
    gates = evaluate_gates(rubric, "c", scores).set_index("gate")
    row = gates.loc["safety_mean"]
    if n_safety < 30:
        assert not row.passed and f"fails closed: {n_safety} scored samples" in row.reason
    else:
        assert row.n == n_safety


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_a_rerun_after_garbage_every_seventh_answer_makes_no_call_and_changes_no_score(
    rubrics, stub, warehouse_path, processes
):
    """Class: the cache keeps the answer that was used, whichever attempt produced it, usable or not; a re-run
    that changes nothing makes no call and gives the same scores and the same missing scores."""
    rubric = rubrics["empathetic_dialogue"]
    stub.state.faults.extend(([None] * 6 + ["garbage"]) * 200)  # every 7th request answers garbage
    stub.state.fault_when = {"thing 13.": "garbage", "thing 101.": "garbage"}  # these two, every time they are asked
    n = 520  # 2 workers need 512+ calls
    first, s1 = ask(rubric, warehouse_path, records(n), processes=processes)
    p1 = first[first.judge == PANEL].set_index(["sample_id", "dimension"]).sort_index()
    assert s1.calls > n + 2 and s1.processes == processes  # the garbage answers were asked again
    gone = p1[p1.status == "missing"].reset_index()
    assert {"s13", "s101"} <= set(gone.sample_id) and gone.reason.str.len().gt(5).all()  # garbage twice: missing
    requests = stub.state.requests
    second, s2 = ask(rubric, warehouse_path, records(n), processes=processes)
    p2 = second[second.judge == PANEL].set_index(["sample_id", "dimension"]).sort_index()
    assert stub.state.requests == requests and s2.calls == 0 and s2.cache_hits == n
    pd.testing.assert_series_equal(p1.score, p2.score)
    assert (p1.status == p2.status).all() and (p1.reason.fillna("") == p2.reason.fillna("")).all()


@pytest.mark.slow
@pytest.mark.parametrize("header", ["soon", "30s", "nan", "-5", "inf", "Wed, 21 Oct 2015 07:28:00 GMT", "0"])
def test_any_retry_after_is_survived_and_a_key_echoed_in_the_body_is_never_kept(
    rubrics, stub, warehouse_path, caplog, header
):
    """Class (#19.11): whatever a 429 says in Retry-After, the call goes on with a bounded wait (a value that is
    not a number or a date falls back to our own backoff); a key the server echoes back reaches no row or log."""
    stub.state.retry_after_header = header
    stub.state.faults.extend(["429_echo", "429_echo"])
    df, stats = ask(rubrics["empathetic_dialogue"], warehouse_path, records(3))
    panel = df[df.judge == PANEL]
    assert (panel.status == "ok").all() and stats.http_attempts == 5
    text = df.astype(str).to_string() + caplog.text
    assert "faults-KEY000111" not in text


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_the_timeout_bounds_the_whole_call_not_each_read(rubrics, stub, warehouse_path):
    """Class (#19.10): a server that sends a byte now and then cannot hold a call past its time-out
    (EVAL_JUDGE_TIMEOUT, doubled after each time-out up to 4x: 0.5, 1, 2 s here)."""
    stub.state.drip_interval_s = 0.2  # the answer would take about a minute to arrive
    stub.state.faults.extend(["drip"] * 3)
    df, stats = ask(rubrics["empathetic_dialogue"], warehouse_path, records(1), timeout_s=0.5, max_retries=2)
    panel = df[df.judge == PANEL]
    # each attempt cut at its own time-out (the last at 2 s), three in all, none waited out: the test's own limit
    # (60 s) is what a call held by the drip would have taken, and an ordering, not a stopwatch, says it was not
    assert (panel.status == "missing").all() and panel.reason.str.contains("timeout after 2s").all()
    assert stats.http_attempts == 3


@pytest.mark.slow
def test_a_slow_server_with_few_slots_converges_instead_of_livelocking(rubrics, stub, warehouse_path):
    """#37.1: concurrency 16 against a server that serves 2 requests at a time, 0.4 s each, with a 1 s time-out:
    without adaptation 14 of every 16 calls wait past the time-out, are cut and asked again from the start (the
    server still works through them), round after round. The client halves what it keeps in flight and doubles
    the time-out on time-outs, so every prompt is answered, and the endpoint is never declared down."""
    stub.state.slots, stub.state.latency_s = 2, 0.4
    df, stats = ask(
        rubrics["empathetic_dialogue"], warehouse_path, records(24),
        timeout_s=1.0, max_retries=4, concurrency=16, max_consecutive_failures=8,
    )  # fmt: skip
    panel = df[df.judge == PANEL]
    assert (panel.status == "ok").all(), panel.reason.dropna().unique()[:3]
    assert stub.state.completions <= 24 * 3  # converged: not every call asked max_retries + 1 times


@pytest.mark.slow
@pytest.mark.parametrize("prompts", [24, 110])
def test_an_endpoint_that_never_answers_is_given_up_fast_despite_the_adaptive_limit(
    rubrics, stub, warehouse_path, prompts
):
    """The adaptive limit counts one time-out per cut toward the circuit breaker (a slow server is not a dead one),
    but an endpoint that has never answered counts every time-out after the first cut: a black hole is given up
    in the second wave. #48: once given up, no call waiting its turn makes an attempt and the calls in flight are
    dropped at once (24 prompts took 104 s, each queued call waiting out one more time-out, one at a time; 110
    were still going at 600 s)."""
    stub.state.fault_rate, stub.state.fault_kind, stub.state.timeout_sleep_s = 1.0, "timeout", 60.0
    df, stats = ask(
        rubrics["empathetic_dialogue"], warehouse_path, records(prompts),
        timeout_s=0.3, max_retries=4, concurrency=16, max_consecutive_failures=8,
    )  # fmt: skip
    panel = df[df.judge == PANEL]
    assert (panel.status == "missing").all() and panel.reason.str.contains("stopped asking").all()
    # the first wave (16 in flight, cut once) and the attempts that counted toward the breaker, whatever the
    # number of prompts: none after it tripped (an ordering, not a stopwatch: each would hold 60 s). The server sees
    # at most those: on a loaded machine an attempt cut at 0.3 s may not have been read by it yet
    assert stub.state.requests <= stats.http_attempts <= 16 + 8


def test_a_server_that_advertises_its_slots_is_never_sent_more_at_once(rubrics, stub, warehouse_path):
    """#45: llama-server says how many requests it serves at once (GET /props total_slots, its -np). The first
    client of that endpoint starts there, not at the configured 16: no wave of calls is cut while it learns."""
    stub.state.slots, stub.state.latency_s, stub.state.advertise_slots = 2, 0.3, True
    df, stats = ask(rubrics["empathetic_dialogue"], warehouse_path, records(8), timeout_s=1.0, concurrency=16)
    assert (df[df.judge == PANEL].status == "ok").all()
    assert stub.state.max_in_flight == 2  # both slots used, never more asked at once
    assert (stats.start_concurrency, stats.timeout_cuts) == (2, 0)


@pytest.mark.slow
def test_within_the_advertised_slots_a_slow_answer_is_waited_for_not_cut(rubrics, stub, warehouse_path):
    """#45: at or under the slots the server advertises, a call past its time-out is being worked on, not queued:
    cutting it would throw its work away and pay it again (on ckpt-0300 the first step's wave of cut calls cost a
    third of the bench's wall time). The time-out doubles for the calls in flight and they keep waiting."""
    stub.state.slots, stub.state.latency_s, stub.state.advertise_slots = 2, 1.5, True
    df, stats = ask(rubrics["empathetic_dialogue"], warehouse_path, records(6), timeout_s=1.0, concurrency=16)
    assert (df[df.judge == PANEL].status == "ok").all(), df.reason.dropna().unique()[:3]
    # every prompt asked once: no answer thrown away on a time-out, the limit never halved
    assert stub.state.requests == stats.calls == stats.http_attempts
    assert (stats.start_concurrency, stats.timeout_cuts, stats.timeout_extensions) == (2, 0, 1)
    assert stub.state.max_in_flight == 2


def test_past_the_grown_time_out_a_call_within_the_slots_is_still_cut(rubrics, stub, warehouse_path):
    """The patience is bounded: for a server that has answered, the time-out grows to TIMEOUT_GROWTH times the
    configured one and no further, so a server that then takes longer still is cut, throttled and, past the
    breaker, given up."""
    stub.state.slots, stub.state.advertise_slots, stub.state.latency_s = 2, True, 0.05
    stub.state.stalls = (0.3, 3600.0)  # answers for 0.3 s, then nothing
    df, stats = ask(
        rubrics["empathetic_dialogue"], warehouse_path, records(40),
        timeout_s=0.2, max_retries=1, concurrency=16, max_consecutive_failures=4, max_silence_s=1.0,
    )  # fmt: skip
    panel = df[df.judge == PANEL]
    assert (panel.status == "ok").any(), panel.reason.dropna().unique()[:3]
    missing = panel[panel.status == "missing"]
    assert len(missing) and missing.reason.str.contains("timeout|stopped asking").all(), missing.reason.unique()[:3]
    assert stats.timeout_extensions == 2 and stats.timeout_cuts >= 1  # 0.2 -> 0.4 -> 0.8 (4x), then cut


@pytest.mark.slow
def test_an_endpoint_that_stalls_now_and_then_loses_no_score(rubrics, stub, warehouse_path):
    """#48: an endpoint whose latency oscillates (under heavy load it answered, then went quiet for a few
    time-outs, and so on) was declared unreachable, 80 of 600 scores lost; a call cut in a stall also spent its
    own attempts on the stall. Here the server answers for 0.5 s, then nothing for 2.5 s (eight time-outs), and so
    on: an endpoint that has answered is slow, not dead, while its silence stays under the judge's max_silence_s,
    so every prompt is answered, and a stall costs no call its attempts (max_silence_s=0, the behaviour before,
    loses scores here)."""
    stub.state.latency_s, stub.state.stalls = 0.1, (0.5, 2.5)
    df, stats = ask(
        rubrics["empathetic_dialogue"], warehouse_path, records(100),
        timeout_s=0.3, max_retries=2, concurrency=4, max_consecutive_failures=4, max_silence_s=30.0,
    )  # fmt: skip
    panel = df[df.judge == PANEL]
    assert (panel.status == "ok").all(), panel.reason.dropna().unique()[:3]
    assert stats.timeout_cuts >= 1  # the stalls were met (the test would prove nothing otherwise)


@pytest.mark.slow
def test_an_endpoint_that_answered_then_went_silent_is_given_up_after_max_silence_s(rubrics, stub, warehouse_path):
    """The other side of the bound: an endpoint that answered and then answers nothing at all is given up once it
    has been silent for max_silence_s (and the breaker's failures in a row), in one reason naming the silence."""
    stub.state.latency_s, stub.state.stalls = 0.05, (0.5, 3600.0)
    df, stats = ask(
        rubrics["empathetic_dialogue"], warehouse_path, records(200),
        timeout_s=0.2, max_retries=2, concurrency=4, max_consecutive_failures=4, max_silence_s=2.0,
    )  # fmt: skip
    panel = df[df.judge == PANEL]
    assert (panel.status == "ok").any() and (panel.status == "missing").any()
    missing = panel[panel.status == "missing"]
    assert missing.reason.str.contains("stopped asking").all(), missing.reason.unique()[:3]
    assert missing.reason.str.contains("nothing answered for").all(), missing.reason.unique()[:3]


def test_a_black_hole_that_advertises_slots_is_given_up_as_soon_as_one_that_does_not(rubrics, stub, warehouse_path):
    """#60: a server that answers /props (2 slots) but never a completion was given up ~4x later than one that
    advertises nothing: its waves are small (the slots), so counting to the breaker's 8 took many waves, each of the
    grown time-out. An endpoint that never answered is down once its second wave times out, whatever its size; #73:
    and within its slots, once its first wave has waited twice the time-out (it still took 2x as long)."""
    stub.state.slots, stub.state.advertise_slots = 2, True
    stub.state.fault_rate, stub.state.fault_kind, stub.state.timeout_sleep_s = 1.0, "timeout", 60.0
    df, stats = ask(
        rubrics["empathetic_dialogue"], warehouse_path, records(12),
        timeout_s=0.2, max_retries=4, concurrency=16, max_consecutive_failures=8,
    )  # fmt: skip
    panel = df[df.judge == PANEL]
    assert (panel.status == "missing").all() and panel.reason.str.contains("stopped asking").all()
    # #73: one wave of the two slots, waited for twice the time-out (0.2 -> 0.4 s: what one that advertises nothing
    # is given over its two waves, 0.2 then 0.4 s), then nothing more (before: two waves of the grown 0.8 s)
    assert stats.http_attempts <= 2 and stats.timeout_extensions == 1


def test_past_max_silence_the_next_failure_gives_the_endpoint_up_however_few_came_before(rubrics, stub, warehouse_path):
    """#60: EVAL_JUDGE_MAX_SILENCE=15 gave up after 54 s: past the silence, the breaker still counted its failures
    in a row. Silent past max_silence_s, the endpoint is down at its next failure."""
    stub.state.latency_s, stub.state.stalls = 0.05, (0.5, 3600.0)
    df, stats = ask(
        rubrics["empathetic_dialogue"], warehouse_path, records(200),
        timeout_s=0.4, max_retries=50, concurrency=2, max_consecutive_failures=1000, max_silence_s=1.0,
    )  # fmt: skip
    panel = df[df.judge == PANEL]
    missing = panel[panel.status == "missing"]
    assert len(missing) and missing.reason.str.contains("nothing answered for").all(), missing.reason.unique()[:3]
    answered = int((panel.status == "ok").sum())
    # the attempts after the stall: a few time-outs of the two in flight to pass the second of silence, not the
    # breaker's thousand (or every prompt's 51)
    assert stats.http_attempts - answered <= 2 * 8, (stats.http_attempts, answered)
