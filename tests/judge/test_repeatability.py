"""The judge's own noise, measured by scoring a subset again: against the local OpenAI-protocol server with a
known noise (each score one step off with probability p), over real HTTP."""

import numpy as np
import pandas as pd
import pytest

from eval_pipeline.core.config import RepeatSpec
from eval_pipeline.devtools.openai_stub import StubServer
from eval_pipeline.judge.repeat import noise_band, pick_subset, repeatability
from eval_pipeline.judge.runner import judge_samples
from eval_pipeline.scoring.comparison import compare
from eval_pipeline.storage.warehouse import Warehouse
from tests.helpers.judges import judge_named, openai_judge
from tests.judge.test_judge import emp_records


def _repeat(rubric, records, wh, times):
    return [judge_samples(rubric, "c", records, wh, config=openai_judge(), repeat=r)[0] for r in range(times)]


@pytest.mark.slow
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_repeat_noise_is_estimated_within_tolerance(tmp_path, monkeypatch, rubrics, p):
    rubric = rubrics["empathetic_dialogue"]
    records = emp_records(80)
    with StubServer() as server:
        server.state.score_noise = p
        server.state.rng.seed(5)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        wh = Warehouse(str(tmp_path / "w.duckdb"))
        runs = _repeat(rubric, records, wh, 3)
        assert server.state.completions == 3 * 80  # each repeat its own cache key: asked again
        again = _repeat(rubric, records, wh, 3)  # ... and a re-run asks nothing
        assert server.state.completions == 3 * 80
    dims = [d.key for d in rubric.judged_dimensions]
    df = repeatability("c", runs, dims).set_index("dimension")
    pd.testing.assert_frame_equal(df, repeatability("c", again, dims).set_index("dimension"))
    assert (df.n_samples == 80).all() and (df.times == 3).all()
    if p == 0:
        assert (df.share_changed == 0).all() and (df.alpha_interval == 1).all() and (df.mean_within_sd == 0).all()
        return
    # each scoring is one step off with probability p: all three agree when none moved or all three moved the
    # same way (1/2 of the time each inside the scale, always at its ends): between these two bounds
    changed_lo, changed_hi = 1 - (1 - p) ** 3 - p**3, 1 - (1 - p) ** 3 - p**3 / 4
    assert changed_lo - 0.12 < df.share_changed.mean() < changed_hi + 0.12
    # the SD of three draws of {0 w.p. 1-p, +-1 w.p. p}: its mean by simulation of the same process
    sim = np.random.default_rng(0).choice([0, 1, -1], p=[1 - p, p / 2, p / 2], size=(200_000, 3)).std(axis=1, ddof=1)
    assert df.mean_within_sd.mean() == pytest.approx(sim.mean(), abs=0.08)
    assert (df.alpha_interval < 0.95).all()


def test_the_subset_is_seeded_stratified_and_stable(rubrics):
    rubric = rubrics["npc_dialogue"]
    records = [
        {"sample_id": f"n{i}", "npc_type": "guard" if i % 4 else "merchant", "behavior_state": "idle"}
        for i in range(100)
    ]
    spec = RepeatSpec(samples=20, times=3)
    a = pick_subset(rubric, "ck", records, spec)
    assert [r["sample_id"] for r in a] == [r["sample_id"] for r in pick_subset(rubric, "ck", records, spec)]
    assert len(a) == 20 and len({r["sample_id"] for r in a}) == 20
    assert sum(r["npc_type"] == "merchant" for r in a) == 5  # a quarter of the samples, a quarter of the subset
    assert [r["sample_id"] for r in pick_subset(rubric, "other", records, spec)] != [r["sample_id"] for r in a]


def test_the_comparison_says_whether_a_change_is_beyond_judge_noise(rubrics):
    rubric = rubrics["kg_qa"]
    n = 60
    parent = pd.DataFrame({"sample_id": [f"s{i}" for i in range(n)], "accuracy": 3.0, "fluency": 3.0})
    child = parent.assign(accuracy=3.5, fluency=3.05)
    df = compare(rubric, "c", "p", child, parent, {"accuracy": 0.5, "fluency": 0.5}).set_index("score")
    band = noise_band(0.5, n, n)
    assert band == pytest.approx(1.96 * 0.5 * np.sqrt(2 / n))
    assert df.loc["accuracy", "judge_noise_95"] == pytest.approx(band) and df.loc["accuracy", "beyond_judge_noise"]
    assert not df.loc["fluency", "beyond_judge_noise"]
    assert pd.isna(compare(rubric, "c", "p", child, parent).set_index("score").loc["accuracy", "beyond_judge_noise"])


def test_the_repeatability_gate_passes_fails_and_fails_closed(rubrics):
    from eval_pipeline.core.config import Gate
    from eval_pipeline.scoring.gates import GateInputs, evaluate_gate

    rubric = rubrics["kg_qa"]
    g = Gate(name="rep", kind="judge_repeatability", threshold=0.8, min_samples=15)
    dims = [d.key for d in rubric.judged_dimensions]
    table = pd.DataFrame(
        dict(checkpoint_id="c", dimension=dims, n_samples=20, times=3, alpha_interval=[0.9, 0.95, 0.7, 0.99, 0.85],
             mean_within_sd=0.2, share_changed=0.3, missing=0)
    )  # fmt: skip
    (r,) = evaluate_gate(g, rubric, pd.DataFrame(), GateInputs(load=lambda t: table))
    assert not r.passed and r.value == pytest.approx(0.7) and f"fails on {dims[2]}" in r.reason
    (r,) = evaluate_gate(g, rubric, pd.DataFrame(), GateInputs(load=lambda t: table.assign(alpha_interval=0.9)))
    assert r.passed and r.n == 20
    (r,) = evaluate_gate(g, rubric, pd.DataFrame(), GateInputs(load=lambda t: None))
    assert not r.passed and r.reason.startswith("fails closed")
    (r,) = evaluate_gate(g, rubric, pd.DataFrame(), GateInputs(load=lambda t: table.assign(n_samples=5)))
    assert not r.passed and r.reason.startswith("fails closed")


def test_the_offline_judge_states_a_distribution_and_is_noisy_only_when_asked_again(tmp_path, rubrics):
    """The heuristic judge's declared uncertainty: a discretized normal around its point, SD 0.15 of the width,
    tilted to mean the point; the written score is the point rounded; asked again it drifts (SD 0.08 of the
    width) and writes a draw, seeded."""
    from eval_pipeline.judge import heuristic as h

    dist = h.distribution(0.5, 1, 5)  # x = 3, SD 0.6, symmetric (no tilt): weights e^-((v-3)/0.6)^2/2
    w = {v: np.exp(-0.5 * ((v - 3) / 0.6) ** 2) for v in range(1, 6)}
    assert dist == pytest.approx({v: w[v] / sum(w.values()) for v in w}, abs=1e-12)
    assert dist[3] == pytest.approx(1 / (1 + 2 * np.exp(-1 / 0.72) + 2 * np.exp(-4 / 0.72)), abs=1e-12)
    for f in np.linspace(0, 1, 41):  # tilted so that the expected score is the point itself, ends included
        d = h.distribution(f, 1, 7)
        assert sum(d.values()) == pytest.approx(1) and sum(v * p for v, p in d.items()) == pytest.approx(1 + 6 * f)
    assert h.distribution(1.0, 1, 5) == {1: 0, 2: 0, 3: 0, 4: 0, 5: 1}
    assert max(h.distribution(0.6, 1, 5).items(), key=lambda t: t[1])[0] == h.to_scale(0.6, 1, 5) == 3

    rubric = rubrics["empathetic_dialogue"]
    records = emp_records(80)
    wh = Warehouse(str(tmp_path / "w.duckdb"))
    runs = [judge_samples(rubric, "c", records, wh, config=judge_named("heuristic"), repeat=r)[0] for r in range(3)]
    again = [judge_samples(rubric, "c", records, wh, config=judge_named("heuristic"), repeat=r)[0] for r in range(3)]
    for a, b in zip(runs, again, strict=True):
        pd.testing.assert_frame_equal(a, b)  # seeded: the same draws on every run
    panel = runs[0][runs[0].judge == "panel"]
    assert panel.score.equals(panel.expected_score) and panel.score_distribution.notna().all()
    assert (panel.chosen_score == panel.chosen_score.round()).all()
    dims = [d.key for d in rubric.judged_dimensions]
    df = repeatability("c", runs, dims).set_index("dimension")
    assert (df.score_source == "expected").all()
    # the expected score moves only with the drift: the SD of (x, x + e1, x + e2), e ~ N(0, 0.08 * 4), is at most
    # that of the unclipped process (the scale's ends pull it in)
    sigma = h.DRIFT * 4
    e = np.random.default_rng(1).normal(0, sigma, size=(200_000, 2))
    bound = np.c_[np.zeros(len(e)), e].std(axis=1, ddof=1).mean()
    assert (df.mean_within_sd > 0.4 * bound).all() and (df.mean_within_sd < 1.1 * bound).all()
    # the written score is a draw: noisier than the expected one, and it changes on most samples
    assert (df.mean_within_sd_chosen > 2 * df.mean_within_sd).all() and (df.share_changed_chosen > 0.3).all()
    assert (df.alpha_chosen < df.alpha_interval).all()


def test_repeat_scores_waiting_on_a_judge_batch_make_the_gate_pending_and_the_verdict_pending_judge(rubrics):
    """#73: with batch judging and nothing wrong, only batches that take longer, a checkpoint was decided FAILED
    GATES (`judge_repeatability` fails closed: no sample scored every time) while its repeat batch still worked. A
    repeat score waiting on a judge batch is counted ``pending`` (not ``missing``), the gate is pending, and the
    verdict is `pending judge`, naming the gate."""
    from eval_pipeline.core.config import Gate
    from eval_pipeline.core.contracts import BATCH_PENDING, PANEL
    from eval_pipeline.scoring.gates import GateInputs, evaluate_gate
    from eval_pipeline.scoring.verdict import Verdict, _gates, _reasons

    rubric = rubrics["kg_qa"]
    dims = [d.key for d in rubric.judged_dimensions]

    def scoring(score, reason=None):
        rows = [(s, d) for s in ("a", "b", "c") for d in dims]
        return pd.DataFrame(
            {"sample_id": [s for s, _ in rows], "dimension": [d for _, d in rows], "judge": PANEL,
             "score": score, "chosen_score": score, "score_source": "chosen", "reason": reason}
        )  # fmt: skip

    waiting = f"{BATCH_PENDING} batch_x in progress (0 of 15 done)"
    table = repeatability("c", [scoring(3.0), scoring(np.nan, waiting)], dims)
    assert (table.pending == 3).all() and (table.missing == 0).all() and (table.n_samples == 0).all()
    g = Gate(name="rep", kind="judge_repeatability", threshold=0.8, min_samples=2)
    (r,) = evaluate_gate(g, rubric, pd.DataFrame(), GateInputs(load=lambda t: table))
    assert r.status == "pending" and "waiting on a judge batch" in r.reason, r.reason
    v = Verdict("kg_qa", "c")
    kinds, pending = _gates(v, [dict(gate="rep", kind=r.kind, value=None, passed=False, status=r.status,
                                     reason=r.reason, threshold=0.8)])  # fmt: skip
    _reasons(v, kinds=kinds, pending=pending, notes=[], regression_gate=False)
    assert v.verdict == "pending judge" and v.gates_failed == 0, (v.verdict, v.reasons)
    assert any(kind == "pending" and text.startswith("rep: ") for kind, text in v.reasons), v.reasons
    # a score that is missing for another reason still fails closed
    table = repeatability("c", [scoring(3.0), scoring(np.nan, "refused")], dims)
    assert (table.pending == 0).all() and (table.missing == 3).all()
    (r,) = evaluate_gate(g, rubric, pd.DataFrame(), GateInputs(load=lambda t: table))
    assert r.status == "failed" and r.reason.startswith("fails closed")


def test_the_table_says_which_scores_the_scorings_compared():
    """#45: a scoring whose scores are partly expected values (probabilities read) and partly written scores (no
    distribution for some rows) is 'mixed', not 'chosen'; all read is 'expected'; none read is 'chosen'."""
    from eval_pipeline.judge.repeat import score_source

    def panel(sources):
        return pd.DataFrame(
            {"dimension": "d", "score": [3.0] * len(sources), "score_source": sources, "sample_id": ["a", "b"]}
        )

    assert score_source([panel(["expected", "expected"])] * 2, "d") == "expected"
    assert score_source([panel(["expected", "chosen"]), panel(["expected", "expected"])], "d") == "mixed"
    assert score_source([panel(["chosen", "chosen"])] * 2, "d") == "chosen"
    assert score_source([panel(["chosen", "chosen"])] * 2, "other") == "chosen"


def test_worked_examples_waiting_on_a_judge_batch_leave_a_trusted_judge_pending_not_failed(rubrics):
    """#73: the worked examples' scores in a judge batch still working were read as off (judged missing), so a
    trusted judge's gate failed; they are on their way: the gate is pending, saying so. A missing score for any
    other reason is still off."""
    from eval_pipeline.core.contracts import BATCH_PENDING
    from eval_pipeline.scoring.gates import typed
    from eval_pipeline.scoring.gates.judge_reliability import _one

    rubric = rubrics["kg_qa"]
    g = typed(next(x for x in rubric.gates if x.kind == "judge_reliability"))
    row = pd.Series(dict(n_rated=200, kappa_quadratic=0.8, verdict="trusted", reason="kappa_q 0.80", drift=False))
    waiting = f"{BATCH_PENDING} batch_x in progress (0 of 3 done)"
    cal = pd.DataFrame(dict(example_id=["e1", "e2"], dimension="d", stated=4.0, judged=[4.0, np.nan],
                            reason=[None, waiting]))  # fmt: skip
    r = _one(g, "judge_reliability", row, cal, None)
    assert r.status == "pending" and "1 worked-example scores waiting on a judge batch" in r.reason, r.reason
    r = _one(g, "judge_reliability", row, cal.assign(reason=[None, "refused"]), None)
    assert r.status == "failed" and "worked examples off" in r.reason, r.reason
