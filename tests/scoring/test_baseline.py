"""#74: a pinned baseline. A slow decline whose every step is significant but below the practical margin passes the
parent comparison (each step is "changed, below the margin") and fails ``no_regression_vs_baseline``, whose
cumulative drop is well above it; numbers from a baseline judged by another judge are never compared."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from eval_pipeline.rubrics import load_rubrics
from eval_pipeline.scoring.comparison import compare, practical_margins
from eval_pipeline.scoring.gates import evaluate_gate, other_checkpoints
from eval_pipeline.scoring.gates.base import GateInputs
from eval_pipeline.scoring.gates.baseline import BaselineSpec


def _rubric():
    rubric = next(r for r in load_rubrics() if r.name == "answer_quality")
    drift = BaselineSpec(
        name="no_drift", kind="no_regression_vs_baseline", threshold=0, min_samples=30, params={"baseline": "c0"}
    )
    return rubric.model_copy(update={"gates": [*rubric.gates, drift]}), drift


def _history(rubric, steps: int = 5) -> tuple[dict[str, pd.DataFrame], float]:
    """Checkpoints c0..c5 of the same 200 prompts, each 0.6 of the headline's practical margin below its parent
    (the judge's own noise 0.05 a sample: every step significant)."""
    score = rubric.headline
    rng = np.random.default_rng(7)
    base = rng.uniform(2.5, 4.5, 200)
    probe = pd.DataFrame({"sample_id": [f"s{i}" for i in range(200)], score: base})
    margin = practical_margins(rubric, probe)[score]
    frames = {
        f"c{k}": probe.assign(**{score: base - k * 0.6 * margin + rng.normal(0, 0.05, 200)}) for k in range(steps + 1)
    }
    return frames, margin


def test_a_slow_decline_passes_every_parent_step_and_fails_against_the_baseline():
    rubric, drift = _rubric()
    frames, margin = _history(rubric)
    regression = next(g for g in rubric.gates if g.kind == "regression")
    assert other_checkpoints(rubric) == ["c0"]
    for k in range(1, len(frames)):
        child, parent = f"c{k}", f"c{k - 1}"
        rows = compare(rubric, child, parent, frames[child], frames[parent])
        step = rows.set_index("score").loc[rubric.headline]
        assert step.p_holm < 0.05 and abs(step.delta) < margin  # significant, and smaller than the margin
        inputs = GateInputs(
            load=lambda t, rows=rows: rows if t == "comparison" else None, parent=parent, lineage_known=True
        )
        (by_parent,) = evaluate_gate(regression, rubric, frames[child], inputs)
        assert by_parent.passed, by_parent.reason
        baseline = GateInputs(checkpoint=child, load_of=lambda t, c: frames[c] if t == "scores" else None)
        (against,) = evaluate_gate(drift, rubric, frames[child], baseline)
        cumulative = k * 0.6 * margin
        if cumulative > margin * 1.5:  # well past the margin: a regression against the release
            assert not against.passed and against.status == "failed", against.reason
            assert f"vs baseline c0 on {rubric.headline}" in against.reason
        if k == 1:  # one step: below the margin against the baseline too
            assert against.passed, against.reason


def test_the_baseline_itself_and_a_baseline_not_evaluated_or_judged_by_another_judge():
    rubric, drift = _rubric()
    frames, _ = _history(rubric, steps=1)
    (itself,) = evaluate_gate(drift, rubric, frames["c0"], GateInputs(checkpoint="c0"))
    assert itself.passed and "is the baseline" in itself.reason
    (missing,) = evaluate_gate(drift, rubric, frames["c1"], GateInputs(checkpoint="c1"))
    assert missing.status == "pending" and "has no scores yet" in missing.reason
    who = {"c0": pd.DataFrame({"judge_identity": ["aaa"]}), "c1": pd.DataFrame({"judge_identity": ["bbb"]})}
    inputs = GateInputs(
        load=lambda t: who["c1"] if t == "judge_identity" else None,
        checkpoint="c1",
        load_of=lambda t, c: frames[c] if t == "scores" else who[c] if t == "judge_identity" else None,
    )
    (other,) = evaluate_gate(drift, rubric, frames["c1"], inputs)
    assert other.status == "pending" and "another judge" in other.reason


def test_a_baseline_gate_without_its_checkpoint_is_refused_naming_the_field():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="baseline"):
        BaselineSpec(name="no_drift", kind="no_regression_vs_baseline", threshold=0, params={})
