"""Probability-weighted scores (G-Eval): the distribution over the scale read from the score token's top
log probabilities, on hand-computed cases and against the local OpenAI-protocol server over real HTTP."""

import math

import pandas as pd
import pytest

from eval_pipeline.agreement.compute import compute_agreement
from eval_pipeline.core.config import JudgeSpec
from eval_pipeline.core.contracts import PANEL
from eval_pipeline.devtools.openai_stub import StubServer
from eval_pipeline.devtools.stub_answers import stub_distribution
from eval_pipeline.judge.logprobs import expected, read_distributions, score_distributions
from eval_pipeline.judge.runner import judge_samples
from eval_pipeline.storage.warehouse import Warehouse
from tests.helpers.judges import openai_judge
from tests.judge.test_judge import emp_records


def _lp(p: float) -> float:
    return math.log(p)


def test_expected_score_on_hand_computed_distributions():
    text = '{"scores": {"a": 4, "b": 2}, "rationale": "ok"}'
    tokens = ['{"scores": {"a": ', "4", ', "b": ', "2", '}, "rationale": "ok"}']
    alts = {
        "4": [["4", _lp(0.5)], ["5", _lp(0.3)], ["3", _lp(0.1)], ["x", _lp(0.1)]],
        "2": [["2", _lp(0.9)], ["9", _lp(0.1)]],  # 9 is off the 1-5 scale: not part of the distribution
    }
    logprobs = [[t, alts.get(t, [[t, 0.0]])] for t in tokens]
    d = score_distributions(text, logprobs, {"a": (1, 5), "b": (1, 5)})
    assert d["a"] == pytest.approx({3: 0.1 / 0.9, 4: 0.5 / 0.9, 5: 0.3 / 0.9})
    assert expected(d["a"]) == pytest.approx((3 * 0.1 + 4 * 0.5 + 5 * 0.3) / 0.9)
    assert d["b"] == {2: 1.0}
    # a score spread over two tokens, or tokens that do not spell the answer: no distribution, the written score
    split = [[t, [[t, 0.0]]] for t in ['{"scores": {"a": 1', "0", "}}"]]
    assert score_distributions('{"scores": {"a": 10}}', split, {"a": (0, 100)}) == {}
    # tokens that spell the score but not every character of the text (a server stripped a fence or trailing
    # whitespace from the message): the distribution is still read (#37.3); tokens that spell another score: not
    assert score_distributions(text, logprobs[:-1], {"a": (1, 5)})["a"] == pytest.approx(d["a"])
    other = read_distributions(text, logprobs, {"a": (1, 5)}, written={"a": 5})["a"]
    assert other.dist is None and "another score" in other.note


def test_server_token_streams_fences_two_digit_numbers_and_the_on_scale_floor():
    """#37.3, 5, 6: what a real server sends (llama.cpp): a fence the message text lacks, trailing whitespace,
    10 written as "1" + "0", alternatives from before the grammar mostly off the scale."""
    fenced = ["```json\n", '{"scores": {"a": ', "7", "}}", "\n```", "  "]
    lp = [[t, [[t, 0.0]]] for t in fenced]
    lp[2] = ["7", [["7", _lp(0.6)], ["8", _lp(0.3)], ["x", _lp(0.1)]]]
    text = '{"scores": {"a": 7}}'  # what the message says after the server stripped the fence
    r = read_distributions(text, lp, {"a": (1, 10)}, written={"a": 7})["a"]
    assert r.dist == pytest.approx({7: 0.6 / 0.9, 8: 0.3 / 0.9}) and r.share == pytest.approx(0.9)
    # "10" as "1" + "0": P(10) = P("1") * P("0" next); P(1) = P("1") * (1 - P(a digit next))
    ten = [['{"scores": {"a": ', [['{"', 0.0]]], ["1", [["1", _lp(0.7)], ["9", _lp(0.3)]]],
           ["0", [["0", _lp(0.8)], ["}", _lp(0.2)]]], ["}}", [["}}", 0.0]]]]  # fmt: skip
    r = read_distributions('{"scores": {"a": 10}}', ten, {"a": (1, 10)}, written={"a": 10})["a"]
    assert r.dist == pytest.approx({1: 0.7 * 0.2, 9: 0.3, 10: 0.7 * 0.8}) and expected(r.dist) > 7
    # #45: a written 10 whose "1" is mostly followed by digits making 11-19 (off the 1-10 scale, forbidden by
    # the grammar): that mass is dropped, never booked as 1, and the rest renormalised (it was 1.1 expected)
    after = [["0", _lp(0.02)], ["1", _lp(0.9)], ["2", _lp(0.07)], ["}", _lp(0.01)]]
    teen = [['{"scores": {"a": ', [['{"', 0.0]]], ["1", [["1", _lp(0.99)], ["9", _lp(0.01)]]], ["0", after],
            ["}}", [["}}", 0.0]]]]  # fmt: skip
    r = read_distributions('{"scores": {"a": 10}}', teen, {"a": (1, 10)}, written={"a": 10}, floor=0.0)["a"]
    on = 0.99 * 0.02 + 0.99 * 0.01 + 0.01
    assert r.dist == pytest.approx({1: 0.99 * 0.01 / on, 9: 0.01 / on, 10: 0.99 * 0.02 / on})
    assert expected(r.dist) > 5.5 and r.share == pytest.approx(on)
    r = read_distributions('{"scores": {"a": 10}}', teen, {"a": (1, 10)}, written={"a": 10})["a"]
    assert r.dist is None and "only 0.04" in r.note  # below the floor: the written 10, and why
    # #45 on llama.cpp: a written 1 on 1-10, followed by ",": the alternatives for the token after it say how
    # likely the model was to go on to 10; it was refused as "may begin a longer number" (0 of 30 items read)
    one = [['{"answers": {"a": ', [['{"', 0.0]]], ["1", [["1", _lp(0.8)], ["2", _lp(0.2)]]],
           [",", [[",", _lp(0.85)], ["0", _lp(0.1)], ["5", _lp(0.05)]]], ['"b": 3}}', [['"b', 0.0]]]]  # fmt: skip
    r = read_distributions('{"answers": {"a": 1, "b": 3}}', one, {"a": (1, 10)}, written={"a": 1})["a"]
    assert r.dist == pytest.approx({1: 0.8 * 0.85 / 0.96, 2: 0.2 / 0.96, 10: 0.8 * 0.1 / 0.96})
    assert r.share == pytest.approx(0.96)  # 0.8 * 0.05 went on to 15, off the scale: dropped
    # a single-token 7 whose alternative "1" (which may begin 10) holds real probability: not read, said why
    amb = [['{"scores": {"a": ', [['{"', 0.0]]], ["7", [["7", _lp(0.7)], ["1", _lp(0.3)]]], ["}}", [["}}", 0.0]]]]
    r = read_distributions('{"scores": {"a": 7}}', amb, {"a": (1, 10)}, written={"a": 7})["a"]
    assert r.dist is None and "longer number" in r.note
    # most probability off the scale (a grammar forced the token): the written score, and why
    off = [['{"scores": {"a": ', [['{"', 0.0]]], ["4", [["4", _lp(0.2)], ["x", _lp(0.7)]]], ["}}", [["}}", 0.0]]]]
    r = read_distributions('{"scores": {"a": 4}}', off, {"a": (1, 5)}, written={"a": 4})["a"]
    assert r.dist is None and r.share == pytest.approx(0.2) and "only 0.20" in r.note


@pytest.mark.parametrize("source", ["expected", "chosen"])
def test_the_judge_records_distribution_and_expected_score_over_http(tmp_path, monkeypatch, rubrics, source):
    rubric = rubrics["empathetic_dialogue"]
    panel = rubric.panel.model_copy(
        update={"judges": [JudgeSpec(name="probs", top_logprobs=5)], "score_source": source}
    )
    rubric = rubric.model_copy(update={"panel": panel})
    records = emp_records(12)
    with StubServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        wh = Warehouse(str(tmp_path / "w.duckdb"))
        df, stats = judge_samples(rubric, "c", records, wh, config=openai_judge())
        assert all(b.get("logprobs") is True and b.get("top_logprobs") == 5 for b in server.state.bodies)
        again, stats2 = judge_samples(rubric, "c", records, wh, config=openai_judge())
        assert stats2.calls == 0  # the probabilities come back from the cache with the answer
    pd.testing.assert_frame_equal(
        df.drop(columns=["cached", "latency_ms", "prompt_tokens", "completion_tokens", "attempts"]),
        again.drop(columns=["cached", "latency_ms", "prompt_tokens", "completion_tokens", "attempts"]),
    )
    rows = df[(df.judge == "probs") & (df.kind == "dimension")]
    assert len(rows) == 12 * 5 and rows.expected_score.notna().all()
    for r in rows.itertuples():
        dist = {int(k): p for k, p in stub_distribution(int(r.chosen_score), 1, 5).items() if k.isdigit()}
        want = sum(v * p for v, p in dist.items()) / sum(dist.values())
        assert r.expected_score == pytest.approx(want, abs=1e-5)
        assert r.score == pytest.approx(r.expected_score if source == "expected" else r.chosen_score)
    panel_rows = df[df.judge == PANEL]
    assert panel_rows.expected_score.notna().all() and panel_rows.chosen_score.notna().all()
    # agreement for both readings, so the gain (or loss) of reading probabilities is visible
    ratings = pd.DataFrame(
        [dict(checkpoint_id="c", sample_id=f"s{i}", evaluator=e, rater_kind="human", dimension="emotion",
              score=float(3 + (i + j) % 3), source_file="f", line_number=i) for i in range(12)
         for j, e in enumerate(["a", "b"])]
    )  # fmt: skip
    agreement = compute_agreement(rubric, "c", ratings, df)
    assert {"judge~human_mean", "judge_chosen~human_mean"} <= set(agreement.raters)
