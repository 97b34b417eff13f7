from pathlib import Path

import pytest
import yaml

from eval_pipeline.core.config import RubricConfigError
from eval_pipeline.rubrics import load_rubric, load_rubrics
from tests.conftest import RUBRIC_DIR


def test_all_five_seed_rubrics_load():
    names = sorted(r.name for r in load_rubrics(RUBRIC_DIR))
    assert names == ["answer_quality", "empathetic_dialogue", "kg_qa", "npc_dialogue", "roleplay_style"]


def test_scales_and_anchors_follow_the_documents(rubrics):
    npc = rubrics["npc_dialogue"]
    assert [d.key for d in npc.dimensions] == [
        "persona_consistency",
        "context_awareness",
        "dialogue_naturalness",
        "plot_relevance",
        "response_appropriateness",
    ]
    assert npc.dimensions[0].levels[5].startswith("Perfect match")
    aq = rubrics["answer_quality"]
    assert (aq.scale.min, aq.scale.max) == (0, 5)
    assert {d.key: d.pass_threshold for d in aq.dimensions} == {
        "semantic": 3,
        "completeness": 4,
        "accuracy": 4,
        "presentation": 3,
    }
    assert sum(i.points for i in aq.dimensions[2].checklist) == 5
    emp = rubrics["empathetic_dialogue"]
    assert any(d.holistic for d in emp.dimensions)
    assert any("Crisis rule" in g for d in emp.dimensions for g in d.boundary_guidance)
    assert len(emp.examples) == 12
    rp = rubrics["roleplay_style"]
    q = rp.questionnaire
    assert [len(m.items) for m in q.metrics] == [10, 10, 10]
    assert sum(i.reverse for m in q.metrics for i in m.items) >= 6
    assert (q.scale.min, q.scale.max) == (1, 10)
    npc_gates = {g.name: g for g in npc.gates}
    assert npc_gates["dimension_means"].threshold == 3.5
    assert npc_gates["min_samples"].threshold == 50


def test_version_is_a_stable_hash_that_changes_with_the_config(tmp_path, rubrics):
    src = RUBRIC_DIR / "kg_qa.yaml"
    assert load_rubric(src).version == rubrics["kg_qa"].version
    data = yaml.safe_load(src.read_text())
    data["dimensions"][0]["levels"][5] = "Changed anchor"
    changed = tmp_path / "kg_qa.yaml"
    changed.write_text(yaml.safe_dump(data))
    assert load_rubric(changed).version != rubrics["kg_qa"].version
    # formatting-only edits (comments, key order) do not change the version
    same = tmp_path / "sub" / "kg_qa.yaml"
    same.parent.mkdir()
    same.write_text("# a comment\n" + yaml.safe_dump(yaml.safe_load(src.read_text()), sort_keys=True))
    assert load_rubric(same).version == rubrics["kg_qa"].version


def _broken(tmp_path: Path, mutate) -> Path:
    data = yaml.safe_load((RUBRIC_DIR / "npc_dialogue.yaml").read_text())
    mutate(data)
    p = tmp_path / "npc_dialogue.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize(
    "mutate, field, problem",
    [
        (lambda d: d.pop("dimensions") and d.update(dimensions=[]), "dimensions", "dimensions or a questionnaire"),
        (lambda d: d["scale"].update(max=1), "scale", "must be greater than min"),
        (
            lambda d: d["dimensions"][1]["levels"].pop(3),
            "dimensions.context_awareness.levels",
            "levels must give an anchor for every score",
        ),
        (
            lambda d: d["gates"][1].update(dimensions=["charm"]),
            "gates.min_samples.dimensions",
            "unknown dimensions ['charm']",
        ),
        (lambda d: d["gates"][0].update(kind="vibes"), "gates.no_regression.kind", "unknown gate kind 'vibes'"),
        (lambda d: d["inputs"]["fields"][0].update(type="uuid"), "inputs.fields.sample_id.type", "Input should be"),
        (lambda d: d.update(headline="nonexistent"), "headline", "'nonexistent' is neither"),
        (lambda d: d.update(colour="blue"), "colour", "Extra inputs are not permitted"),
        (
            lambda d: d["dimensions"][0].update(key="Persona Consistency"),
            "dimensions.Persona Consistency.key",
            "not a valid dimension key",
        ),
    ],
)
def test_broken_config_names_file_field_and_problem(tmp_path, mutate, field, problem):
    path = _broken(tmp_path, mutate)
    with pytest.raises(RubricConfigError) as exc:
        load_rubric(path)
    msg = str(exc.value)
    assert str(path) in msg
    assert f"field '{field}'" in msg
    assert problem in msg


def test_name_must_match_file_and_be_safe(tmp_path):
    p = tmp_path / "other.yaml"
    p.write_text((RUBRIC_DIR / "kg_qa.yaml").read_text())
    with pytest.raises(RubricConfigError, match="must match the file name"):
        load_rubric(p)
    data = yaml.safe_load((RUBRIC_DIR / "kg_qa.yaml").read_text())
    data["name"] = "kg_qa; DROP TABLE x"
    q = tmp_path / "kg_qa.yaml"
    q.write_text(yaml.safe_dump(data))
    with pytest.raises(RubricConfigError, match="unsafe rubric name"):
        load_rubric(q)


def test_invalid_yaml_and_non_mapping(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(RubricConfigError, match="not valid YAML"):
        load_rubric(p)
    p.write_text("- a\n- b\n")
    with pytest.raises(RubricConfigError, match="expected a mapping"):
        load_rubric(p)


def test_every_problem_of_a_file_at_once_with_paths_by_key(tmp_path):
    """Typos in a metric name, a metric parameter, a heuristic feature, and gates missing what their kind needs:
    all reported when the rubric loads, each under the path of its field."""
    data = yaml.safe_load((RUBRIC_DIR / "kg_qa.yaml").read_text())
    data["metrics"][0]["params"]["statment_field"] = "question"
    data["metrics"].append({"function": "tripel_coverage", "params": {}})
    data["dimensions"][0]["heuristic"].append({"feature": "field_overlapp", "weight": 1})
    data["gates"] += [
        {"name": "mean_len", "kind": "metric_min", "threshold": 1},
        {"name": "share", "kind": "score_share", "score": data["headline"], "threshold": 0.5},
    ]
    path = tmp_path / "kg_qa.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(RubricConfigError) as exc:
        load_rubric(path)
    msg = str(exc.value)
    first_metric, first_dim = data["metrics"][0]["function"], data["dimensions"][0]["key"]
    assert "(5 problem(s))" in msg
    assert f"field 'metrics.{first_metric}.params': unknown parameter 'statment_field'" in msg
    assert "field 'metrics.tripel_coverage': unknown metric function 'tripel_coverage'" in msg
    assert f"field 'dimensions.{first_dim}.heuristic.field_overlapp': unknown heuristic feature" in msg
    assert "field 'gates.mean_len.score'" in msg and "field 'gates.share.values'" in msg


def test_a_parameter_of_the_wrong_type_is_refused(tmp_path):
    data = yaml.safe_load((RUBRIC_DIR / "answer_quality.yaml").read_text())
    route = next(m for m in data["metrics"] if m["function"] == "route_score")
    route["params"]["preferred"] = "full marks"
    path = tmp_path / "answer_quality.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(RubricConfigError, match="parameter 'preferred' should be float, got str"):
        load_rubric(path)


def test_a_gate_parameter_its_kind_never_reads_is_refused(tmp_path):
    """#35: a gate's params are typed per kind: a name the kind never reads (answer_quality once carried
    ``pass_fail_kappa`` under judge_reliability, silently ignored) or a value of another type is refused at load."""
    data = yaml.safe_load((RUBRIC_DIR / "answer_quality.yaml").read_text())
    rel = next(g for g in data["gates"] if g["kind"] == "judge_reliability")
    rel["params"]["pass_fail_kappa"] = 0.6
    reg = next(g for g in data["gates"] if g["kind"] == "regression")
    reg["params"] = {"ignore": "route_score"}  # a list is wanted
    path = tmp_path / "answer_quality.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(RubricConfigError) as exc:
        load_rubric(path)
    msg = str(exc.value)
    assert "gates.judge_reliability.params.pass_fail_kappa" in msg and "Extra inputs are not permitted" in msg
    assert f"gates.{reg['name']}.params.ignore" in msg


def test_one_broken_file_does_not_hide_the_others(tmp_path):
    for name in ("kg_qa", "npc_dialogue", "roleplay_style"):
        (tmp_path / f"{name}.yaml").write_text((RUBRIC_DIR / f"{name}.yaml").read_text())
    kg = yaml.safe_load((tmp_path / "kg_qa.yaml").read_text())
    kg["headline"] = "nope"
    (tmp_path / "kg_qa.yaml").write_text(yaml.safe_dump(kg))
    (tmp_path / "npc_dialogue.yaml").write_text("name: [unclosed")
    with pytest.raises(RubricConfigError) as exc:
        load_rubrics(tmp_path)
    msg = str(exc.value)
    assert msg.startswith(f"2 of 3 rubric configs in {tmp_path} are invalid")
    assert "kg_qa.yaml: invalid rubric config" in msg and "field 'headline'" in msg
    assert "npc_dialogue.yaml:1:" in msg and "not valid YAML" in msg and "roleplay_style.yaml" not in msg


def test_a_misspelt_key_gets_the_nearest_one_and_bad_yaml_one_line_with_its_place(tmp_path):
    """#60: a misspelt key said only "Extra inputs are not permitted"; a YAML error was PyYAML's multi-line text
    run together on one line."""
    import yaml

    from eval_pipeline.core.config import RubricConfigError
    from eval_pipeline.rubrics import load_rubric

    doc = yaml.safe_load((RUBRIC_DIR / "kg_qa.yaml").read_text())
    doc["gates"][0]["thresold"] = doc["gates"][0].pop("threshold")
    doc["scael"] = doc.pop("scale")
    path = tmp_path / "kg_qa.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(RubricConfigError) as err:
        load_rubric(path)
    text = str(err.value)
    assert "did you mean 'threshold'?" in text and "did you mean 'scale'?" in text
    path.write_text("name: kg_qa\nscale: {min: 1, max: 5\ndimensions: []\n")
    with pytest.raises(RubricConfigError) as err:
        load_rubric(path)
    assert str(err.value) == (
        f"{path}:3:11: not valid YAML: expected ',' or '}}', but got ':' (while parsing a flow mapping, from line 2)"
    )


@pytest.mark.parametrize(
    "body, said",
    [
        ("{a: " * 3000 + "1" + "}" * 3000, "nested too deeply to read"),  # was Python's RecursionError, no file
        ("{a: " * 40 + "1" + "}" * 40, "nested more than 16 levels deep"),
        ("{blob: '" + "x" * 2_000_000 + "'}", "at most 65,536"),  # was accepted
    ],
)
def test_a_judges_extra_body_is_bounded_and_said_with_its_file(tmp_path, body, said):
    from eval_pipeline.core.config import RubricConfigError
    from eval_pipeline.rubrics import load_rubric

    path = tmp_path / "kg_qa.yaml"
    path.write_text(
        (RUBRIC_DIR / "kg_qa.yaml").read_text() + f"\npanel:\n  judges:\n    - name: j\n      extra_body: {body}\n"
    )
    with pytest.raises(RubricConfigError) as err:
        load_rubric(path)
    assert str(path) in str(err.value) and said in str(err.value)
