import json
from pathlib import Path

import pandas as pd

from eval_pipeline.ingest.jsonl import read_jsonl
from eval_pipeline.ingest.validation import build_schema, validate_raw


def good_emp(i: int, **over) -> dict:
    row = {
        "sample_id": f"s{i}",
        "topic": "work stress",
        "user_statement": "I am stressed about work.",
        "response": "It sounds like work has been overwhelming lately.",
    }
    row.update(over)
    return row


def _write(tmp_path: Path, lines: list, raw_bytes: bytes | None = None) -> Path:
    p = tmp_path / "empathetic_dialogue.jsonl"
    if raw_bytes is not None:
        p.write_bytes(raw_bytes)
    else:
        p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return p


def test_every_line_is_valid_or_quarantined_with_its_reason(tmp_path, rubrics):
    rubric = rubrics["empathetic_dialogue"]
    lines = [
        good_emp(1),
        '{"sample_id": "s2", "user_statement": "trunc',  # malformed JSON
        good_emp(3, response=None),  # null response
        {k: v for k, v in good_emp(4).items() if k != "user_statement"},  # missing field
        good_emp(5, response=["not", "text"]),  # wrong type
        good_emp(1, response="a different reply"),  # repeated id
        good_emp(6, response="   \t "),  # empty response
        "[1, 2]",  # not an object
        '{"sample_id": "s7", "topic": "x", "user_statement": "hi", "response": NaN}',  # NaN
        good_emp(8, sample_id=8),  # id not a string
        good_emp(9, response="x" * 8001),  # too long
        "",  # blank line: not a row
        good_emp(10),
    ]
    read = read_jsonl(_write(tmp_path, lines), "ck1")
    assert read.blank_lines == 1
    res = validate_raw(rubric, read.frame)
    assert res.lines_read == 12
    assert len(res.samples) + len(res.quarantine) == res.lines_read
    assert sorted(res.samples["sample_id"]) == ["s1", "s10"]
    # the first occurrence of a repeated id is kept, the later one quarantined
    assert res.samples.loc[res.samples.sample_id == "s1", "response"].item().startswith("It sounds like")
    reasons = dict(zip(res.quarantine.line_number, res.quarantine.reason))
    assert reasons[2].startswith("malformed JSON")
    assert "field 'response' required field is missing or null" in reasons[3]
    assert "field 'user_statement' required field is missing or null" in reasons[4]
    assert "field 'response' must be a string" in reasons[5]
    assert "sample id repeated" in reasons[6]
    assert "field 'response' must not be empty" in reasons[7]
    assert reasons[8] == "expected a JSON object, got list"
    assert "NaN is not valid JSON" in reasons[9]
    assert "field 'sample_id' must be a string" in reasons[10]
    assert "at most 8000" in reasons[11]
    assert set(res.quarantine.raw_line) >= {"[1, 2]"}
    assert (res.quarantine.rubric == "empathetic_dialogue").all()


def test_bom_and_non_utf8_lines(tmp_path, rubrics):
    rubric = rubrics["empathetic_dialogue"]
    data = b"\xef\xbb\xbf" + json.dumps(good_emp(1)).encode() + b"\n" + b'{"sample_id": "s2", "response": "caf\xe9"}\n'
    read = read_jsonl(_write(tmp_path, [], raw_bytes=data), "ck1")
    res = validate_raw(rubric, read.frame)
    assert list(res.samples.sample_id) == ["s1"]
    assert "not valid UTF-8" in res.quarantine.reason.item()
    assert "\\xe9" in res.quarantine.raw_line.item()


def test_lazy_validation_reports_every_problem_of_a_row(rubrics):
    rubric = rubrics["npc_dialogue"]
    row = {
        "sample_id": "n1",
        "npc_name": "A",
        "npc_type": "guard",
        "scenario": "x",
        "persona": "short",
        "player_input": "hi",
        "response": "hello",
        "game_state": {
            "behavior_state": "dancing",
            "health": 250,
            "mood": "ok",
            "nearby_entities": "wolf",
            "time_of_day": "teatime",
            "location": "gate",
        },
    }
    raw = pd.DataFrame(
        {
            "checkpoint_id": ["c"],
            "source_file": ["f"],
            "line_number": [1],
            "raw_line": [json.dumps(row)],
            "decode_error": [None],
        }
    )
    res = validate_raw(rubric, raw)
    reason = res.quarantine.reason.item()
    for expected in [
        "'behavior_state' must be one of",
        "'health' must be <= 100",
        "'nearby_entities' must be a list of strings",
        "'time_of_day' must be one of",
        "'persona' must have at least 10",
    ]:
        assert expected in reason


def test_nested_paths_and_json_columns(rubrics):
    rubric = rubrics["kg_qa"]
    row = {
        "sample_id": "k1",
        "source_chunk": "The agency funds the schools in the district every year.",
        "kg_triples": [{"subject": "agency", "predicate": "funds", "object": "schools"}],
        "question_type": "factual",
        "shot_type": "zero_shot",
        "question": "Who funds the schools?",
        "answer": "The agency.",
    }
    bad = dict(row, sample_id="k2", kg_triples=[{"subject": "agency", "object": "schools"}])
    raw = pd.DataFrame(
        {
            "checkpoint_id": ["c", "c"],
            "source_file": ["f", "f"],
            "line_number": [1, 2],
            "raw_line": [json.dumps(row), json.dumps(bad)],
            "decode_error": [None, None],
        }
    )
    res = validate_raw(rubric, raw)
    assert json.loads(res.samples.kg_triples.item())[0]["predicate"] == "funds"
    assert "non-empty string keys ['subject', 'predicate', 'object']" in res.quarantine.reason.item()


def test_schema_is_a_pandera_schema_named_after_the_table(rubrics):
    schema = build_schema(rubrics["answer_quality"])
    assert schema.name == "answer_quality.samples"
    assert "question_id" in schema.columns and "answer_criteria" in schema.columns
