"""One verdict, decided once, told the same everywhere (#43): each item of the issue's "Why" as a test."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pandas as pd
import pytest

from eval_pipeline.cli import main as cli
from eval_pipeline.console import closing_line, report_lines
from eval_pipeline.scoring.verdict import (
    Verdict,
    _gate_text,
    _reasons,
    change_of,
    read,
    regression_text,
    store,
)
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR, SAMPLE_CHECKPOINTS


def test_a_rubric_without_a_reliability_gate_still_shows_its_untrusted_judge():
    """roleplay_style ckpt-0200 printed PASSED 7/7 while its judge_trust said untrusted on creativity."""
    v = Verdict("roleplay_style", "ckpt-0200", gates_total=7, gates_passed=7, untrusted=["creativity"])
    v.drifting = ["consistency"]
    _reasons(v, kinds=[], pending=[], notes=[], regression_gate=True)
    assert v.verdict == "judge untrusted"
    assert ("judge", "untrusted on creativity; drifts on this checkpoint on consistency") in v.reasons


def test_a_pending_judge_is_pending_ratings_and_says_how_many_more():
    v = Verdict("kg_qa", "c", trust_pending=["accuracy"], ratings_needed=12)
    _reasons(v, kinds=[], pending=[], notes=[], regression_gate=False)
    assert v.verdict == "pending ratings"
    assert "about 12 more rated samples would settle it" in v.reasons[0][1]


def test_a_failed_worked_example_is_said_beside_a_pending_dimension():
    """#72: a failed worked-example gate was said nowhere when another dimension was pending, while the headline
    said JUDGE UNTRUSTED and the judge line named no untrusted dimension."""
    off = "trusted on ratings, not on the worked examples: ...; worked examples off by more than ±1: ex_1/b stated 1"
    v = Verdict("kg_qa", "c", trust_pending=["a"], ratings_needed=12, rated=40)
    v.failed_gates = [{"gate": "judge_reliability_b", "kind": "judge_reliability", "value": 0.8, "threshold": 0.6,
                       "reason": off}]  # fmt: skip
    _reasons(v, kinds=["judge_reliability"], pending=[], notes=[], regression_gate=False)
    assert v.verdict == "judge untrusted"
    said = " ".join(text for _, text in v.reasons)
    assert "pending on a" in said and "ex_1/b stated 1" in said, v.reasons


def test_the_failed_value_is_named_after_the_dimension_it_is_the_value_of():
    """`failed dimension_mean: accuracy_mean 3.49` named accuracy while 3.49 was kg_alignment's mean."""
    g = {"gate": "accuracy_mean", "value": 3.486, "threshold": 3.8, "reason": "below 3.8 on kg_alignment; means: ..."}
    assert _gate_text(g) == "accuracy_mean on kg_alignment 3.49 (threshold 3.8)"


def test_a_gate_that_failed_without_a_value_says_why_instead_of_n_a():
    """#73: gates that failed closed read `failed judge_repeatability … n/a`: a gate with no value says why."""
    g = {"gate": "judge_repeatability", "value": None, "threshold": 0.7, "reason": "fails closed: no repeated scores"}
    text = _gate_text(g)
    assert (
        "n/a" not in text and text == "judge_repeatability: no value (fails closed: no repeated scores; threshold 0.7)"
    )
    assert "n/a" not in _gate_text({**g, "value": float("nan")})


def test_a_lower_is_better_regression_says_so():
    r = {"score": "ertd", "parent": "ckpt-0200", "delta": 12.18, "ci_low": 7.2, "ci_high": 17.2, "p_holm": 0.0002,
         "lower_is_better": True, "calibrated": False}  # fmt: skip
    assert "(lower is better)" in regression_text(r)


@pytest.mark.parametrize(
    "delta, lo, hi, p, lower, expected",
    [
        (0.171, 0.07, 0.27, 0.009, False, "better"),  # significant, up, higher is better
        (12.2, 7.3, 17.2, 0.0002, True, "worse"),  # significant, up, lower is better
        (0.2, -0.1, 0.5, 0.4, False, "no clear change"),  # the sign alone is no colour
        (-0.16, -0.25, -0.08, None, False, "worse"),  # no p: the interval decides
    ],
)
def test_colour_means_significance_and_direction(delta, lo, hi, p, lower, expected):
    assert change_of(delta, lo, hi, p, lower) == expected


def test_a_reason_is_never_cut_before_the_part_a_person_needs():
    note = (
        "not comparable: parent ckpt-0200 judged by heuristic judge (prompt 8fbf16f5), this checkpoint by "
        "gpt-4o-mini @ 127.0.0.1:8011 (prompt 8fbf16f5, temperature 0, seed 7); re-judge the parent with the "
        "current judge: eval-pipeline run --checkpoint ckpt-0200 --rubric npc_dialogue"
    )
    v = Verdict("npc_dialogue", "ckpt-0300", reasons=[("judge", note)])
    assert any(line.endswith("--rubric npc_dialogue") for line in report_lines(v))


def test_counts_agree_with_each_other():
    """ "FAILED GATES (1 failed gates)" counted rubrics, "GATES FAILED: 7 gate(s) failed" gates."""
    v = Verdict("kg_qa", "c", gates_total=12, gates_passed=4, gates_failed=7, gates_pending=1)
    assert "gates 4/12 passed, 1 pending" in v.summary
    assert v.gates_passed + v.gates_failed + v.gates_pending == v.gates_total
    w = Verdict("npc", "c", gates_total=10, gates_failed=3, gates_passed=7)
    line = closing_line(3, [SimpleNamespace(success=True, checkpoint_id="ckpt-0100")], [v, w])
    assert "10 gate(s) failed in 2 checkpoint x rubric result(s)" in line


def test_an_incomplete_result_keeps_the_last_complete_one_a_click_away(tmp_path):
    """A run against a dead endpoint replaced a complete result with NaN, n 0: the verdict row says incomplete and
    names the lake snapshot that still holds the last complete result."""
    wh = Warehouse(f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}")
    complete = Verdict("kg_qa", "ckpt-0300", verdict="regressed", headline=4.2)
    store(wh, complete, "run-1", 17)
    bad = Verdict("kg_qa", "ckpt-0300", verdict="incomplete", incomplete=["300 of 300 judge scores missing"])
    store(wh, bad, "run-2", 25)
    (got,) = read(wh, "kg_qa", ["ckpt-0300"])
    assert got.verdict == "incomplete" and got.last_complete_snapshot == 17 and got.snapshot is None
    store(wh, bad, "run-3", 30)  # still incomplete: the last complete one is carried, not lost
    assert read(wh, "kg_qa")[0].last_complete_snapshot == 17
    wh.close()


def test_a_verdict_decided_by_another_run_is_the_one_a_successful_command_reports(tmp_path):
    """The command's run succeeded; the stored verdict was decided by another run (an earlier one, when nothing it is
    decided from changed, so the command's run left it; or a re-decision that ran at the same time): the command
    reports the stored one, the one every reader sees, which names its run. A run that failed reads no other run's
    verdict."""
    from eval_pipeline.console import UNDECIDED, decided

    wh = Warehouse(f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}")
    rubric = SimpleNamespace(name="kg_qa")
    store(wh, Verdict("kg_qa", "ckpt-0300", verdict="passed"), "mine", 3)
    assert decided(wh, rubric, "ckpt-0300", ["mine"], succeeded=True).verdict == "passed"
    store(wh, Verdict("kg_qa", "ckpt-0300", verdict="regressed"), "sensor-run", 4)
    again = decided(wh, rubric, "ckpt-0300", ["mine"], succeeded=True)
    assert again.verdict == "regressed" and again.run_id == "sensor-run"
    failed = decided(wh, rubric, "ckpt-0300", ["mine"], succeeded=False)
    assert failed.verdict == UNDECIDED and failed.reasons == [("not decided", "the run ended before its verdict")]
    wh.close()


@pytest.mark.slow
def test_one_broken_rubric_file_is_skipped_in_one_line_and_the_others_run(tmp_path, monkeypatch, capfd):
    rubrics = tmp_path / "rubrics"
    shutil.copytree(RUBRIC_DIR, rubrics)
    (rubrics / "kg_qa.yaml").write_text("name: kg_qa\nscale: {min: 1}\n")
    root = tmp_path / "ckpts"
    (root / "ckpt-0100").mkdir(parents=True)
    for name in ("kg_qa.jsonl", "npc_dialogue.jsonl", "checkpoint.json"):
        shutil.copy(SAMPLE_CHECKPOINTS / "ckpt-0100" / name, root / "ckpt-0100" / name)
    monkeypatch.setenv("EVAL_RUBRIC_DIR", str(rubrics))
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}")
    code = cli(["run", "--no-fail-on-gates"])
    out, err = capfd.readouterr()
    skipped = [ln for ln in err.splitlines() if "kg_qa.yaml skipped" in ln]
    assert len(skipped) == 1 and "Traceback" not in err
    assert "npc_dialogue" in out and "  kg_qa " not in out
    assert code == 2  # otherwise clean: the skipped file is the configuration error the exit code says
    assert cli(["run", "--rubric", "npc_dialogue", "--no-fail-on-gates"]) == 0
    assert cli(["run", "--rubric", "kg_qa"]) == 2  # asked for by name: its problems, exit 2
    assert "scale" in capfd.readouterr().err
    wh = Warehouse()
    verdicts = pd.DataFrame(wh.query_rows("SELECT rubric, checkpoint_id, verdict FROM main.verdicts"))
    assert list(verdicts[0]) == ["npc_dialogue"]


def test_a_share_past_the_limit_never_prints_as_the_limit():
    """#48: "10%, at most 10%" hid why data was incomplete."""
    from eval_pipeline.scoring.verdict import _share

    assert _share(26, 250, 0.10) == "10.4%; the rubric allows 10.0%"
    assert _share(300, 300, 0.05) == "100%; the rubric allows 5%"


def test_two_judges_of_one_name_and_an_extra_body_nested_too_deep_are_refused_in_one_line():
    from pydantic import ValidationError

    from eval_pipeline.core.config.protocol import JudgePanel, JudgeSpec

    with pytest.raises(ValidationError, match="given twice"):
        JudgePanel(judges=[JudgeSpec(name="a"), JudgeSpec(name="a")])
    deep: dict = {}
    node = deep
    for _ in range(100_000):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(ValidationError, match="nested more than 16 levels deep"):
        JudgeSpec(name="a", extra_body=deep)


def test_scores_waiting_on_a_judge_batch_are_pending_not_a_failure_and_exit_7():
    """#61: a checkpoint whose judge answers are in a batch still working: `pending judge` (over failed gates the
    partial scores would fail), the batch named with its progress, exit 7 (not 0, not a failure code)."""
    from eval_pipeline.console import exit_code
    from eval_pipeline.core.terminal import EXIT_PENDING
    from eval_pipeline.runtime.outcome import RunOutcome

    batch = "judge batch batch_abc in progress (120 of 400 done)"
    v = Verdict("kg_qa", "c", gates_total=3, gates_failed=1, judge_pending=600, judge_batches=[batch])
    v.failed_gates = [{"gate": "g", "kind": "dimension_mean", "value": 1.0, "threshold": 3.0, "reason": ""}]
    _reasons(v, kinds=["dimension_mean"], pending=[], notes=[], regression_gate=False)
    assert v.verdict == "pending judge" and ("pending", batch) in v.reasons
    assert "600 judge scores waiting on batches" in v.summary
    ok = RunOutcome("c", ["kg_qa"], True, 1.0, "r")
    assert exit_code([ok], [v]) == EXIT_PENDING == 7
    assert "PENDING" in closing_line(EXIT_PENDING, [ok], [v]) and "nothing failed" in closing_line(
        EXIT_PENDING, [ok], [v]
    )


def test_the_last_screen_says_what_each_verdict_shown_means_and_what_to_do_next():
    """#73: `make demo` ended with every result red and never said what the verdicts mean or what to do next."""
    from eval_pipeline.console import what_next

    shown = [Verdict("kg_qa", "c1", verdict="regressed"), Verdict("kg_qa", "c2", verdict="judge untrusted")]
    shown.append(Verdict("npc_dialogue", "c1", verdict="judge untrusted"))
    lines = what_next(shown)
    text = "\n".join(lines)
    assert lines[0].startswith("What the 3 result(s) mean")
    assert "REGRESSED (1)" in text and "JUDGE UNTRUSTED (2)" in text and "PASSED" not in text
    assert "eval-pipeline view" in text and "make annotate" in text and "eval-pipeline align" in text
    assert what_next([]) == []
