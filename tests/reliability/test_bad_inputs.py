"""At least 30 kinds of bad input: each gets a clear error or a quarantine row; nothing valid is lost."""

import json

import pytest
import yaml

from eval_pipeline.core.config import RubricConfigError
from eval_pipeline.ingest.checkpoints import CheckpointError, read_checkpoint
from eval_pipeline.ingest.jsonl import read_jsonl
from eval_pipeline.ingest.ratings import load_ratings
from eval_pipeline.ingest.validation import validate_raw
from eval_pipeline.rubrics import load_rubric
from tests.conftest import RUBRIC_DIR

GOOD_EMP = {
    "sample_id": "good",
    "topic": "work",
    "user_statement": "I am tired.",
    "response": "That sounds exhausting.",
}
GOOD_NPC = {
    "sample_id": "good",
    "npc_name": "Brann",
    "npc_type": "blacksmith",
    "scenario": "x",
    "persona": "A gruff dwarven smith.",
    "player_input": "Hi",
    "response": "Hmph. Aye.",
    "game_state": {
        "behavior_state": "idle",
        "health": 80,
        "mood": "calm",
        "nearby_entities": ["cat"],
        "time_of_day": "noon",
        "location": "forge",
    },
}
GOOD_KG = {
    "sample_id": "good",
    "source_chunk": "The agency funds the schools of the district.",
    "kg_triples": [{"subject": "agency", "predicate": "funds", "object": "schools"}],
    "question_type": "factual",
    "shot_type": "zero_shot",
    "question": "Who funds schools?",
    "answer": "The agency.",
}


def emp(**over):
    return json.dumps({**GOOD_EMP, "sample_id": "bad", **over})


def npc_state(**over):
    return json.dumps({**GOOD_NPC, "sample_id": "bad", "game_state": {**GOOD_NPC["game_state"], **over}})


def kg(**over):
    return json.dumps({**GOOD_KG, "sample_id": "bad", **over})


CASES = [
    ("truncated JSON", "empathetic_dialogue", emp()[:40], "malformed JSON"),
    ("not JSON at all", "empathetic_dialogue", "hello world", "malformed JSON"),
    ("JSON array", "empathetic_dialogue", "[1, 2]", "expected a JSON object, got list"),
    ("JSON string", "empathetic_dialogue", '"just text"', "expected a JSON object, got str"),
    ("JSON null", "empathetic_dialogue", "null", "expected a JSON object, got NoneType"),
    ("NaN", "empathetic_dialogue", emp()[:-1] + ', "extra": NaN}', "NaN is not valid JSON"),
    ("Infinity", "npc_dialogue", npc_state()[:-2] + ', "health2": Infinity}}', "Infinity is not valid JSON"),
    (
        "-Infinity",
        "npc_dialogue",
        npc_state().replace('"health": 80', '"health": -Infinity'),
        "-Infinity is not valid JSON",
    ),
    (
        "missing required field",
        "empathetic_dialogue",
        json.dumps({k: v for k, v in GOOD_EMP.items() if k != "user_statement"} | {"sample_id": "bad"}),
        "'user_statement' required field is missing",
    ),
    ("null required field", "empathetic_dialogue", emp(response=None), "'response' required field is missing or null"),
    ("empty response", "empathetic_dialogue", emp(response=""), "'response' must not be empty"),
    ("whitespace response", "empathetic_dialogue", emp(response=" \n\t "), "'response' must not be empty"),
    ("number where string", "empathetic_dialogue", emp(response=42), "'response' must be a string"),
    ("object where string", "empathetic_dialogue", emp(response={"text": "hi"}), "'response' must be a string"),
    ("list where string", "empathetic_dialogue", emp(user_statement=["a", "b"]), "'user_statement' must be a string"),
    ("boolean where string", "empathetic_dialogue", emp(response=True), "'response' must be a string"),
    ("id not a string", "empathetic_dialogue", emp(sample_id=7), "'sample_id' must be a string"),
    ("id too long", "empathetic_dialogue", emp(sample_id="x" * 129), "'sample_id' must have at most 128"),
    ("repeated id", "empathetic_dialogue", json.dumps({**GOOD_EMP, "response": "another reply"}), "sample id repeated"),
    ("response over max length", "empathetic_dialogue", emp(response="y" * 8001), "at most 8000"),
    ("10 MB line", "empathetic_dialogue", emp(response="z" * 10_000_000), "at most 8000"),
    ("string where number", "npc_dialogue", npc_state(health="high"), "'health' must be a finite number"),
    ("boolean where number", "npc_dialogue", npc_state(health=True), "'health' must be a finite number"),
    ("number off its range", "npc_dialogue", npc_state(health=250), "'health' must be <= 100"),
    ("negative number", "npc_dialogue", npc_state(health=-5), "'health' must be >= 0"),
    ("value outside allowed set", "npc_dialogue", npc_state(time_of_day="teatime"), "'time_of_day' must be one of"),
    (
        "string where list",
        "npc_dialogue",
        npc_state(nearby_entities="a wolf"),
        "'nearby_entities' must be a list of strings",
    ),
    (
        "list of mixed types",
        "npc_dialogue",
        npc_state(nearby_entities=["wolf", 3]),
        "'nearby_entities' must be a list of strings",
    ),
    (
        "nested object missing",
        "npc_dialogue",
        json.dumps({k: v for k, v in GOOD_NPC.items() if k != "game_state"} | {"sample_id": "bad"}),
        "'behavior_state' required field is missing",
    ),
    (
        "nested object is a string",
        "npc_dialogue",
        json.dumps({**GOOD_NPC, "sample_id": "bad", "game_state": "idle"}),
        "'location' required field is missing",
    ),
    ("triple missing a key", "kg_qa", kg(kg_triples=[{"subject": "a", "object": "b"}]), "non-empty string keys"),
    ("empty triples list", "kg_qa", kg(kg_triples=[]), "'kg_triples' must not be empty"),
    ("triples not objects", "kg_qa", kg(kg_triples=["a -> b -> c"]), "must be a list of JSON objects"),
    ("unknown question type", "kg_qa", kg(question_type="rhetorical"), "'question_type' must be one of"),
    ("deeply nested JSON", "empathetic_dialogue", "[" * 100000 + "]" * 100000, "malformed JSON"),
]


@pytest.mark.slow
@pytest.mark.parametrize("kind, rubric_name, line, reason", CASES, ids=[c[0] for c in CASES])
def test_bad_line_is_quarantined_with_reason_and_nothing_valid_is_lost(
    tmp_path, rubrics, kind, rubric_name, line, reason
):
    rubric = rubrics[rubric_name]
    good = {"empathetic_dialogue": GOOD_EMP, "npc_dialogue": GOOD_NPC, "kg_qa": GOOD_KG}[rubric_name]
    p = tmp_path / f"{rubric_name}.jsonl"
    p.write_text(
        json.dumps(good) + "\n" + line + "\n" + json.dumps({**good, "sample_id": "good2"}) + "\n", encoding="utf-8"
    )
    res = validate_raw(rubric, read_jsonl(p, "c").frame)
    assert sorted(res.samples.sample_id) == ["good", "good2"], res.quarantine.reason.tolist()
    assert len(res.quarantine) == 1 and res.quarantine.line_number.item() == 2
    assert reason in res.quarantine.reason.item()
    assert len(res.samples) + len(res.quarantine) == res.lines_read == 3


def test_non_utf8_and_bom(tmp_path, rubrics):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD_EMP).encode() + b"\n" + emp().encode()[:-2] + b'\xff\xfe"}\n')
    res = validate_raw(rubrics["empathetic_dialogue"], read_jsonl(p, "c").frame)
    assert list(res.samples.sample_id) == ["good"]  # the BOM does not break the first line
    assert "not valid UTF-8" in res.quarantine.reason.item()


def test_empty_file_and_blank_lines(tmp_path, rubrics):
    p = tmp_path / "x.jsonl"
    p.write_text("\n\n   \n", encoding="utf-8")
    read = read_jsonl(p, "c")
    assert read.blank_lines == 3 and len(read.frame) == 0
    assert validate_raw(rubrics["empathetic_dialogue"], read.frame).lines_read == 0


@pytest.mark.parametrize(
    "manifest, error",
    [
        (None, "no checkpoint.json"),
        ("{not json", "not valid JSON"),
        ('["a list"]', "expected a JSON object"),
        ('{"created_at": "2026-10-01T00:00:00Z"}', "'model' must be a non-empty string"),
        ('{"model": "m", "created_at": "yesterday"}', "is not an ISO-8601 date-time"),
        ('{"model": "m", "created_at": "2026-10-01T00:00:00Z", "parent": "../../etc"}', "unsafe checkpoint id"),
    ],
)
def test_invalid_or_missing_checkpoint_json(tmp_path, manifest, error):
    folder = tmp_path / "ckpt-1"
    folder.mkdir()
    if manifest is not None:
        (folder / "checkpoint.json").write_text(manifest)
    with pytest.raises(CheckpointError, match=error):
        read_checkpoint(folder)


def test_ratings_with_wrong_headers_delimiters_and_scores(tmp_path, rubrics):
    rubric = rubrics["empathetic_dialogue"]
    d = tmp_path / rubric.name
    d.mkdir()
    (d / "c.csv").write_text("sample_id\tevaluator\temotion\ns1\tAnn\t4\ns2\tAnn\t9\n")  # tab-separated
    (d / "headers.csv").write_text("item,who,score\ns1,Ann,4\n")
    load = load_ratings(rubric, "c", {"s1", "s2"}, tmp_path)
    assert list(load.ratings.sample_id) == ["s1"]
    reasons = " | ".join(load.quarantine.reason)
    assert "emotion '9' is off the scale 1-5" in reasons and "lacks required column(s)" in reasons


def test_broken_rubric_yaml_is_a_clear_error(tmp_path):
    p = tmp_path / "kg_qa.yaml"
    p.write_text(":\n  - [unbalanced")
    with pytest.raises(RubricConfigError, match="not valid YAML"):
        load_rubric(p)
    data = yaml.safe_load((RUBRIC_DIR / "kg_qa.yaml").read_text())
    data["scale"] = {"min": 5, "max": 1}
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(RubricConfigError, match="field 'scale'"):
        load_rubric(p)


def test_unknown_rubric_file_in_a_checkpoint_is_ignored_with_a_warning(tmp_path, instance, caplog):
    import dagster as dg

    from eval_pipeline.defs.build import build_definitions
    from tests.conftest import write_checkpoint

    root = tmp_path / "ckpts"
    write_checkpoint(root, "ckpt-1", {"empathetic_dialogue": [GOOD_EMP], "mystery_rubric": [GOOD_EMP]})
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(root))
    result = defs.resolve_sensor_def("checkpoint_sensor")(dg.build_sensor_context(instance=instance, definitions=defs))
    assert {k.path[0] for k in result.run_requests[0].asset_selection} == {"empathetic_dialogue"}


@pytest.mark.parametrize("chunk_lines", [2, 245_760])
def test_a_rejected_line_never_makes_a_valid_one_a_repeat(tmp_path, rubrics, chunk_lines):
    """#36.18: ids of lines rejected for another reason (here: ids of the wrong JSON type, or a line failing a
    field) are not "seen"; the valid line with the same id, or the same text of another type, is kept; the
    engine and the row-wise reference agree line by line."""
    from eval_pipeline.ingest.engine import EngineValidation
    from eval_pipeline.ingest.jsonl import read_jsonl
    from eval_pipeline.ingest.rowwise import validate_raw as rowwise
    from eval_pipeline.ingest.validation import validate_raw

    rubric = rubrics["empathetic_dialogue"]
    lines = [
        {**GOOD_EMP, "sample_id": 5},  # 1 rejected: not a string
        {**GOOD_EMP, "sample_id": "5"},  # 2 valid
        {**GOOD_EMP, "sample_id": True},  # 3 rejected
        {**GOOD_EMP, "sample_id": "True"},  # 4 valid
        {**GOOD_EMP, "sample_id": None},  # 5 rejected
        {**GOOD_EMP, "sample_id": "None"},  # 6 valid
        {**GOOD_EMP, "sample_id": "x", "response": ""},  # 7 rejected: empty response
        {**GOOD_EMP, "sample_id": "x"},  # 8 valid: its first valid occurrence
        {**GOOD_EMP, "sample_id": "x"},  # 9 a real repeat
    ]
    p = tmp_path / "e.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    raw = read_jsonl(p, "ck").frame
    for result in (validate_raw(rubric, raw), rowwise(rubric, raw)):
        assert result.samples.line_number.tolist() == [2, 4, 6, 8]
        reasons = dict(zip(result.quarantine.line_number, result.quarantine.reason))
        assert sorted(reasons) == [1, 3, 5, 7, 9] and "repeated" in reasons[9]
        assert not any("repeated" in reasons[n] for n in (1, 3, 5, 7))
    import duckdb

    from eval_pipeline.ingest.engine import make_raw_table

    con = duckdb.connect()
    make_raw_table(con)
    for n, line in enumerate(lines, start=1):
        con.execute("INSERT INTO raw VALUES ('ck', 'f', ?, ?, NULL)", [n, json.dumps(line)])
    engine = EngineValidation(con, rubric, "raw", "ck", chunk_lines=chunk_lines)
    engine.run()
    assert engine.valid == 4 and sorted(engine.bad) == [1, 3, 5, 7, 9]


def test_one_line_of_thirty_thousand_keys_costs_what_it_reads():
    """#36.22: a repeated key among 30,000 is found in one pass (it took ~21 s for 20,000 keys: a count per key).
    Counted, not timed: the keys are compared or hashed a few times each, not once per other key."""
    from eval_pipeline.ingest import parsing

    touched = [0]

    class Key(str):
        __slots__ = ()

        def __eq__(self, other):
            touched[0] += 1
            return str.__eq__(self, other)

        def __hash__(self):
            touched[0] += 1
            return str.__hash__(self)

    n = 30_000
    pairs = [(Key(f"k{i}"), 1) for i in range(n)] + [(Key("k7"), 2)]
    with pytest.raises(ValueError, match="duplicate key\\(s\\) 'k7' in one object"):
        parsing._no_duplicate_keys(pairs)
    assert touched[0] <= 5 * n, touched[0]
    clean = "{" + ", ".join(f'"k{i}": 1' for i in range(n)) + "}"
    with pytest.raises(ValueError, match="duplicate key\\(s\\) 'k7'"):
        parsing.parse_line(clean[:-1] + ', "k7": 2}')


@pytest.mark.parametrize("value, ok", [(-(2**63), True), (2**63 - 1, True), (2**63, False), (-(2**63) - 1, False)])
def test_integers_are_accepted_exactly_on_the_64_bit_range(tmp_path, rubrics, value, ok):
    """#36.24: -9223372036854775808 fits a BIGINT and was refused; the engine and the row-wise reference agree."""
    from eval_pipeline.ingest.jsonl import read_jsonl
    from eval_pipeline.ingest.rowwise import validate_raw as rowwise
    from eval_pipeline.ingest.validation import validate_raw

    p = tmp_path / "e.jsonl"
    p.write_text(json.dumps({**GOOD_EMP, "extra": {"n": value}}) + "\n")
    raw = read_jsonl(p, "ck").frame
    for result in (validate_raw(rubrics["empathetic_dialogue"], raw), rowwise(rubrics["empathetic_dialogue"], raw)):
        assert len(result.samples) == int(ok)
        if not ok:
            assert "outside the 64-bit range" in result.quarantine.reason.iloc[0]
