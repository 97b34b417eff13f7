import csv

import numpy as np
import pandas as pd
import pytest

from eval_pipeline.agreement.compute import compute_agreement, judge_pairs
from eval_pipeline.agreement.trust import trust_rows
from eval_pipeline.ingest.ratings import load_ratings
from eval_pipeline.publish.worklists import neutralise, write_worklists
from eval_pipeline.scoring.gates import GateInputs, evaluate_gate

IDS = {f"s{i}" for i in range(40)}


def _write(tmp_path, rubric, name, text):
    d = tmp_path / rubric
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_ratings_are_validated_and_quarantined_with_reasons(tmp_path, rubrics):
    rubric = rubrics["empathetic_dialogue"]
    root = _write(
        tmp_path,
        rubric.name,
        "ck1.csv",
        "\n".join(
            [
                "sample_id,evaluator,emotion,validation,helpfulness,safety,overall,notes",
                "s1,Ann,4,4,3,5,4,",
                "s2,Ann,4,,3,5,4,missing validation is a missing rating",
                "s99,Ann,4,4,3,5,4,unknown sample",
                "s3,Ann,6,4,3,5,4,off the scale",
                "s4,Ann,4.5,4,3,5,4,not an integer",
                "s5,Ann,four,4,3,5,4,not a number",
                "s1,Ann,3,3,3,3,3,repeated pair",
                "s6,=cmd|' /C calc'!A0,4,4,3,5,4,unsafe evaluator",
                "s7,Bob,3,3,3,3,3",
                "s8,Bob,3,3,3,3,3,",
            ]
        ),
    )
    load = load_ratings(rubric, "ck1", IDS, root)
    assert load.rows_read == 10
    q = dict(zip(load.quarantine.line_number, load.quarantine.reason))
    assert "unknown sample id 's99'" in q[4]
    assert "emotion '6' is off the scale 1-5" in q[5]
    assert "off the scale" in q[6] and "not a number" in q[7]
    assert "repeated rating of 's1' by 'Ann'" in q[8]
    assert "unsafe evaluator name" in q[9]
    assert q[10] == "row has 7 fields, header has 8"
    assert set(load.quarantine.stage) == {"ratings"}
    r = load.ratings
    # #72: a bad score costs only its cell: s3, s4, s5 keep their other four ratings
    assert sorted(r.sample_id.unique()) == ["s1", "s2", "s3", "s4", "s5", "s8"]
    for sid in ("s3", "s4", "s5"):
        assert sorted(r[r.sample_id == sid].dimension) == ["helpfulness", "overall", "safety", "validation"]
    assert len(r[r.sample_id == "s2"]) == 4  # the empty cell is a missing rating
    assert r.loc[(r.sample_id == "s1") & (r.dimension == "emotion"), "score"].item() == 4.0
    # every row read ends as ratings or quarantine (or both: its bad cell quarantined, the rest kept)
    lines = set(r.line_number) | set(load.quarantine.line_number)
    assert load.rows_read == len(lines) == 10


def test_semicolon_files_other_checkpoints_and_broken_headers(tmp_path, rubrics):
    rubric = rubrics["kg_qa"]
    _write(
        tmp_path,
        rubric.name,
        "team_b.csv",
        "sample_id;evaluator;relevance;checkpoint\ns1;TeamB-judge;5;ck1\ns2;TeamB-judge;4;ck2\n",
    )
    _write(tmp_path, rubric.name, "ck1.csv", "id,rater,relevance\ns1,Ann,4\n")
    load = load_ratings(rubric, "ck1", IDS, tmp_path)
    assert list(load.ratings.evaluator) == ["TeamB-judge"] and load.rows_other_checkpoints == 1
    reasons = list(load.quarantine.reason)
    assert len(reasons) == 2 and all("lacks required column(s) ['sample_id', 'evaluator']" in x for x in reasons)
    assert any("ck1.csv" in p for p in load.problems)


def test_answer_quality_recording_template_loads_as_is(tmp_path, rubrics):
    rubric = rubrics["answer_quality"]
    header = (
        "question_id,query,actual_route,preferred_route,semantic_score,completeness_score,accuracy_score,"
        "presentation_score,quality_score,quality_status,route_score,route_status,overall_score,final_status,notes,evaluator"
    )
    rows = [
        "H08,staff with more than 5 years,rag_docs,hr_kpi,4,5,4,4,0.85,EXCELLENT,0.7,ACCEPTABLE,0.81,ACCEPTABLE,"
        '"Answer comprehensive despite wrong route.",Evaluator1',
        "S01,sales bulan 2024-06 "
        'berapa?,sales_kpi,sales_kpi,5,4,5,4,0.90,EXCELLENT,1.0,PERFECT,0.93,PERFECT,"Perfect routing.",Evaluator1',
    ]
    _write(tmp_path, rubric.name, "ck1.csv", "\n".join([header, *rows]))
    load = load_ratings(rubric, "ck1", {"H08", "S01"}, tmp_path)
    assert load.quarantine.empty
    wide = load.ratings.pivot_table(index="sample_id", columns="dimension", values="score")
    assert wide.loc["H08"].to_dict() == {"accuracy": 4, "completeness": 5, "presentation": 4, "semantic": 4}


def _ratings(n, noise, seed=0, dims=("emotion",)):
    rng = np.random.default_rng(seed)
    rows, judge = [], []
    for i in range(n):
        for d in dims:
            true = int(rng.integers(1, 6))
            for ev in ("A", "B"):
                rows.append(
                    dict(
                        checkpoint_id="c",
                        sample_id=f"s{i}",
                        evaluator=ev,
                        dimension=d,
                        score=float(np.clip(true + (rng.integers(-1, 2) if rng.random() < noise else 0), 1, 5)),
                    )
                )
            judge.append(
                dict(
                    checkpoint_id="c",
                    sample_id=f"s{i}",
                    judge="panel",
                    judge_kind="llm",
                    kind="dimension",
                    dimension=d,
                    score=float(true),
                    status="ok",
                    reason=None,
                )
            )
    return pd.DataFrame(rows), pd.DataFrame(judge)


@pytest.mark.slow
def test_agreement_rows_and_judge_reliability_gate(rubrics):
    rubric = rubrics["empathetic_dialogue"]
    dims = tuple(d.key for d in rubric.judged_dimensions)
    ratings, judge = _ratings(40, 0.2, dims=dims)
    ag = compute_agreement(rubric, "c", ratings, judge)
    stats = set(ag.statistic)
    assert {
        "percent_agreement",
        "cohen_kappa",
        "cohen_kappa_linear",
        "cohen_kappa_quadratic",
        "krippendorff_alpha_nominal",
        "krippendorff_alpha_ordinal",
        "krippendorff_alpha_interval",
        "icc_absolute_agreement",
        "icc_consistency",
        "spearman",
        "kendall",
        "mean_absolute_error",
        "bias",
    } <= stats
    kappas = ag[ag.statistic.str.startswith("cohen_kappa")]
    assert kappas.prevalence.notna().all() and kappas.ceiling_share.notna().all()
    gate = next(g for g in rubric.gates if g.kind == "judge_reliability")

    def trust(r, j, own=None):
        pooled = compute_agreement(rubric, "c", r, j)
        own = own if own is not None else pooled
        return trust_rows(rubric, "c", "id1", "judge X", pooled, own, 3, judge_pairs(rubric, r, j))

    def verdict(r, j, cal, own=None):
        rows = trust(r, j, own)
        inputs = GateInputs(load=lambda t: {"judge_trust": rows, "judge_calibration": cal}.get(t))
        return evaluate_gate(gate, rubric, pd.DataFrame({"sample_id": []}), inputs)[0]

    cal = pd.DataFrame([dict(example_id="x", dimension="emotion", stated=5.0, judged=4.0, within_tolerance=True)])
    res = verdict(ratings, judge, cal)
    assert res.passed and res.status == "passed" and res.n == 40 and "within ±1" in res.reason
    # an example stated 5 and judged 3.999999999999808 is within a ±1 tolerance (rounded differences)
    close = pd.DataFrame([dict(example_id="x", dimension="emotion", stated=5.0, judged=3.999999999999808)])
    assert verdict(ratings, judge, close).passed
    # a judge that is off on a worked example fails, naming it
    bad_cal = pd.DataFrame(
        [dict(example_id="safety_1", dimension="safety", stated=1.0, judged=4.0, within_tolerance=False)]
    )
    res = verdict(ratings, judge, bad_cal)
    assert not res.passed and res.status == "failed" and "safety_1/safety stated 1 judged 4" in res.reason
    # too few human ratings in the pooled calibration set: pending, with an estimate of how many more would
    # settle it: at least what the floor asks (30 - 10), fewer for a judge far from the bar than near it
    few_r, few_j = _ratings(10, 0.2, dims=dims)
    res = verdict(few_r, few_j, cal)
    assert res.status == "pending" and not res.passed and "more rated samples would settle it" in res.reason
    assert res.reason.count("pending: ") == 1, res.reason  # #72: said once, not "pending: … pending: …"
    needed = trust(few_r, few_j).set_index("dimension").needed
    assert (needed >= 20).all()
    # a judge unrelated to the humans is untrusted
    rng = np.random.default_rng(9)
    judge_noise = judge.assign(score=rng.integers(1, 6, len(judge)).astype(float))
    res = verdict(ratings, judge_noise, cal)
    assert res.status == "failed" and res.reason.startswith("untrusted")
    # a checkpoint with no ratings of its own carries the verdict of its judge's pooled calibration set
    none_own = compute_agreement(rubric, "c", ratings.iloc[0:0], judge.iloc[0:0])
    res = verdict(ratings, judge, cal, own=none_own)
    assert res.status == "passed" and "from 3 checkpoint(s)" in trust(ratings, judge, none_own).reason.iloc[0]
    # drift: trusted on the pooled set, but on this checkpoint's own ratings the judge behaves differently: the
    # verdict on the judge stays, this checkpoint fails it
    res = verdict(ratings, judge, cal, own=compute_agreement(rubric, "c", ratings, judge_noise))
    assert res.status == "failed" and "drift" in res.reason and "trusted, but drifts" in res.reason


def test_pass_fail_kappa_for_the_answer_quality_protocol(rubrics):
    rubric = rubrics["answer_quality"]
    rows = []
    for i, (a, b) in enumerate(
        [
            ((4, 4, 4, 3), (4, 4, 3, 3)),
            ((2, 2, 2, 2), (2, 2, 3, 2)),
            ((5, 5, 5, 5), (5, 4, 5, 5)),
            ((3, 3, 3, 3), (4, 4, 3, 3)),
        ]
    ):
        for ev, sc in (("E1", a), ("E2", b)):
            for d, v in zip(["semantic", "completeness", "accuracy", "presentation"], sc):
                rows.append(dict(checkpoint_id="c", sample_id=f"q{i}", evaluator=ev, dimension=d, score=float(v)))
    ag = compute_agreement(rubric, "c", pd.DataFrame(rows), None)
    pf = ag[ag.statistic.str.startswith("pass_fail_kappa")].iloc[0]
    # quality: q0 0.75 vs 0.70 (pass/pass), q1 0.40/0.45 (fail/fail), q2 1.0/0.95, q3 0.60/0.70 (fail/pass)
    assert pf.n_items == 4 and pf.value == pytest.approx(0.5) and pf.label == "poor"


def test_worklists_are_written_and_formulas_neutralised(tmp_path, rubrics):
    rubric = rubrics["answer_quality"]
    cats = ["SALES_KPI", "HR_KPI", "RAG_DOCS", "ROBUSTNESS"]
    pris = ["CRITICAL", "HIGH", "MEDIUM", "LOW"]
    samples = pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(60)],
            "query": ['=HYPERLINK("x")'] + ["q"] * 59,
            "category": [cats[i % 4] for i in range(60)],
            "priority": [pris[(i // 4) % 4] for i in range(60)],
            "actual_route": "hr_kpi",
            "preferred_route": "hr_kpi",
        }
    )
    ratings = pd.DataFrame(
        [
            dict(sample_id="q1", evaluator=e, dimension=d, score=v)
            for e, v in (("E1", 4.0), ("E2", 2.0))  # quality 0.8 vs 0.4: past the protocol's 0.2
            for d in ("semantic", "completeness", "accuracy", "presentation")
        ]
    )
    counts = write_worklists(rubric, "ck1", samples, ratings, tmp_path)
    assert counts == {"pilot.csv": 10, "spot_check.csv": 3, "rereview.csv": 1, "scoring_sheet.csv": 60}
    folder = tmp_path / "answer_quality" / "ck1"
    pilot = list(csv.DictReader(open(folder / "pilot.csv")))
    assert len({p["category"] for p in pilot}) == 4 and len({p["priority"] for p in pilot}) >= 3
    sheet = list(csv.DictReader(open(folder / "scoring_sheet.csv")))
    assert sheet[0]["query"] == '\'=HYPERLINK("x")'
    assert list(sheet[0])[-6:] == ["semantic", "completeness", "accuracy", "presentation", "notes", "evaluator"]
    again = write_worklists(rubric, "ck1", samples, ratings, tmp_path)
    assert again == counts and list(csv.DictReader(open(folder / "pilot.csv"))) == pilot  # seeded
    assert [neutralise(x) for x in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "ok", 5]] == [
        "'=1+1",
        "'+1",
        "'-1",
        "'@SUM(A1)",
        "'\tx",
        "ok",
        5,
    ]


def test_a_raters_kind_comes_from_its_column_or_the_rubric(tmp_path, rubrics):
    rubric = rubrics["empathetic_dialogue"]
    rubric = rubric.model_copy(
        update={"human_ratings": rubric.human_ratings.model_copy(update={"model_raters": ["gpt_judge"]})}
    )
    root = _write(
        tmp_path,
        rubric.name,
        "ck1.csv",
        "\n".join(
            [
                "sample_id,evaluator,rater_kind,emotion,validation,helpfulness,safety,overall",
                "s1,Ann,,4,4,3,5,4",
                "s1,claude_paper,MODEL,4,4,3,5,4",
                "s1,gpt_judge,,4,4,3,5,4",
                "s2,Bob,human,3,3,3,3,3",
                "s3,Eve,robot,3,3,3,3,3",
            ]
        ),
    )
    load = load_ratings(rubric, "ck1", IDS, root)
    kinds = load.ratings.drop_duplicates("evaluator").set_index("evaluator").rater_kind.to_dict()
    assert kinds == {"Ann": "human", "claude_paper": "model", "gpt_judge": "model", "Bob": "human"}
    assert list(load.quarantine.reason) == ["rater_kind 'robot': use human or model"]
    assert load.rows_read == 5
