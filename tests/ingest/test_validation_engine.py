"""The engine's validation against the row-by-row reference it replaced: the same split and the same reasons,
line by line, on every kind of bad line of the bad-input suite mixed into a file, on random mutations of good
lines, and on lines that look suspicious to DuckDB but are valid."""

import json
import os
import random
import time

import pytest

from eval_pipeline.ingest.jsonl import read_jsonl
from eval_pipeline.ingest.rowwise import validate_raw as rowwise
from eval_pipeline.ingest.validation import validate_raw
from tests.reliability.test_bad_inputs import CASES, GOOD_EMP, GOOD_KG, GOOD_NPC

GOOD = {"empathetic_dialogue": GOOD_EMP, "npc_dialogue": GOOD_NPC, "kg_qa": GOOD_KG}

VALID_BUT_SUSPICIOUS = [
    {"response": "NaN, Infinity and -inf are words here: [nan, inf]"},
    {"response": 'a key-looking text: \\"k\\": 1, and a trailing comma, }'},
    {"response": "digits 12345678901234567890 in a string and 1e400 too"},
    {"response": "emoji 😀 and an escaped surrogate pair in the raw line"},
    {"extra": {"nested": {"deep": [1, {"a": 2}]}}},
]


def _mutations(good: dict, rng: random.Random) -> list[str]:
    line = json.dumps(good)
    out = []
    for _ in range(40):
        cut = rng.randrange(1, len(line))
        op = rng.randrange(5)
        if op == 0:
            out.append(line[:cut])
        elif op == 1:
            out.append(line[:cut] + rng.choice(['"', ",", "}", "]", ":", "NaN", " ", "\\u"]) + line[cut:])
        elif op == 2:
            k = rng.choice(list(good))
            out.append(json.dumps({**good, k: rng.choice([None, 1, 1.5, True, "", " ", [], {}, ["x"], [{"a": "b"}]])}))
        elif op == 3:
            k = rng.choice(list(good))
            out.append(json.dumps({kk: v for kk, v in good.items() if kk != k}))
        else:
            out.append(line.replace(", ", " , ", 1).replace('": ', '" : ', rng.randrange(2)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("rubric_name", sorted(GOOD))
def test_engine_and_rowwise_agree_line_by_line(tmp_path, rubrics, rubric_name):
    rubric = rubrics[rubric_name]
    good = GOOD[rubric_name]
    rng = random.Random(rubric_name)
    lines = [json.dumps({**good, "sample_id": f"g{i}"}) for i in range(5)]
    lines += [c[2] for c in CASES if c[1] == rubric_name and len(c[2]) < 100_000]
    lines += [json.dumps({**good, **extra, "sample_id": f"s{i}"}) for i, extra in enumerate(VALID_BUT_SUSPICIOUS)]
    lines += _mutations(good, rng)
    lines += [json.dumps(good), '{"sample_id": "dup", "sample_id": "dup2"}', "", "   ", "[]"]
    rng.shuffle(lines)
    p = tmp_path / f"{rubric_name}.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    raw = read_jsonl(p, "ck").frame
    new, old = validate_raw(rubric, raw), rowwise(rubric, raw)
    assert new.samples["line_number"].tolist() == old.samples["line_number"].tolist()
    # the same reasons on every line; the engine lists them in schema order (field, then rule), where the row-wise
    # order depended on whether another line of the same chunk made pandas' pandera fail a check wholesale
    assert {n: set(r.split("; ")) for n, r in zip(new.quarantine.line_number, new.quarantine.reason)} == {
        n: set(r.split("; ")) for n, r in zip(old.quarantine.line_number, old.quarantine.reason)
    }
    assert len(new.samples) + len(new.quarantine) == new.lines_read == len(raw)
    assert len(new.samples) >= 5 + len(VALID_BUT_SUSPICIOUS)  # the suspicious-looking valid lines are kept
    for name in [f.name for f in rubric.inputs.fields if f.type in ("string", "integer", "number", "boolean")]:
        assert new.samples[name].tolist() == old.samples[name].tolist()


@pytest.mark.parametrize("chunk_lines", [2, 245_760])
def test_the_first_line_of_an_id_keeps_it_wherever_the_engine_measured_it(rubrics, chunk_lines):
    """Lines Python judged (here: valid lines that look suspicious to DuckDB) are measured after the others of
    their range; the first line of an id is still the one kept, within a range and across ranges."""
    import duckdb

    from eval_pipeline.ingest.engine import EngineValidation, make_raw_table
    from eval_pipeline.ingest.engine_schema import ID_REPEATED

    suspicious = {"response": "words that look like numbers to DuckDB: [nan, inf]"}
    lines = [
        {**GOOD_EMP, **suspicious, "sample_id": "a"},  # 1: judged by Python, first of "a"
        {**GOOD_EMP, "sample_id": "a"},  # 2: repeated
        {**GOOD_EMP, "sample_id": "b"},  # 3: first of "b"
        {**GOOD_EMP, **suspicious, "sample_id": "b"},  # 4: repeated, judged by Python
        {**GOOD_EMP, "sample_id": "c"},  # 5
    ]
    con = duckdb.connect()
    make_raw_table(con)
    for n, line in enumerate(lines, start=1):
        con.execute("INSERT INTO raw VALUES ('ck', 'f', ?, ?, NULL)", [n, json.dumps(line)])
    engine = EngineValidation(con, rubrics["empathetic_dialogue"], "raw", "ck", chunk_lines=chunk_lines)
    engine.run()
    assert engine.valid == 3
    assert sorted(engine.bad) == [2, 4]
    assert all(reasons == [f"field 'sample_id' {ID_REPEATED}"] for reasons in engine.bad.values())


def test_a_failure_while_checking_a_range_stops_the_look_ahead_cleanly(rubrics, monkeypatch):
    """DuckDB measures the next range while Python checks this one: an error in the check is raised as it is,
    after the look-ahead query has ended, and the connection stays usable."""
    import duckdb

    from eval_pipeline.ingest.engine import EngineValidation, make_raw_table

    con = duckdb.connect()
    make_raw_table(con)
    for n in range(1, 41):
        line = json.dumps({**GOOD_EMP, "sample_id": f"s{n}"})
        con.execute("INSERT INTO raw VALUES ('ck', 'f', ?, ?, NULL)", [n, line])

    def broken(self, schema, frame, seen):
        raise RuntimeError("check failed")

    measured, errors = EngineValidation._measured, []

    def slow(self, cursor, start):  # the next range still being measured when the check fails
        if start > 1:
            time.sleep(0.3)
        try:
            return measured(self, cursor, start)
        except Exception as exc:  # e.g. its cursor closed under it
            errors.append(exc)
            raise

    monkeypatch.setattr(EngineValidation, "_check_range", broken)
    monkeypatch.setattr(EngineValidation, "_measured", slow)
    engine = EngineValidation(con, rubrics["empathetic_dialogue"], "raw", "ck", chunk_lines=4)
    with pytest.raises(RuntimeError, match="check failed"):
        engine.run()
    assert errors == []  # the look-ahead query ended before its cursor was closed
    assert con.execute("SELECT count(*) FROM raw").fetchone() == (40,)


@pytest.mark.slow
@pytest.mark.parametrize("preset", [None, "dirty_decay_ms:2000"])
def test_polars_gives_freed_memory_back_at_once_unless_told_otherwise(preset):
    """The package sets Polars' allocator to return freed pages at once (ingest's peak RSS: DuckDB measures the
    next range with pages Polars would otherwise keep for ~10 s), before any module of it imports Polars; a
    value the environment sets is kept."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    if preset:
        env["_RJEM_MALLOC_CONF"] = preset
    code = "import eval_pipeline.ingest.engine, os; print(os.environ['_RJEM_MALLOC_CONF'])"
    conf = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    # Polars puts its own defaults first; jemalloc reads the options in order, the last of a name wins
    assert conf.strip().endswith(preset or "dirty_decay_ms:0,muzzy_decay_ms:0"), conf
