from pathlib import Path

import pytest
import yaml

from eval_pipeline.core.config import RubricConfigError, load_rubric, load_rubrics

from .conftest import RUBRIC_DIR


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
        (lambda d: d.pop("dimensions") and d.update(dimensions=[]), "<top level>", "dimensions or a questionnaire"),
        (lambda d: d["scale"].update(max=1), "scale", "must be greater than min"),
        (lambda d: d["dimensions"][1]["levels"].pop(3), "<top level>", "levels must give an anchor for every score"),
        (lambda d: d["gates"][1].update(dimensions=["charm"]), "<top level>", "unknown dimensions ['charm']"),
        (lambda d: d["gates"][0].update(kind="vibes"), "gates.no_regression", "unknown gate kind 'vibes'"),
        (lambda d: d["inputs"]["fields"][0].update(type="uuid"), "inputs.fields.0.type", "Input should be"),
        (lambda d: d.update(headline="nonexistent"), "<top level>", "headline 'nonexistent'"),
        (lambda d: d.update(colour="blue"), "colour", "Extra inputs are not permitted"),
        (
            lambda d: d["dimensions"][0].update(key="Persona Consistency"),
            "dimensions.0.key",
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
