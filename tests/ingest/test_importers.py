"""#75: `eval-pipeline import` — a harness's own files become a checkpoint folder the pipeline validates, with
nothing lost and nothing invented. The real tools write their files where they install from the registries:
lm-evaluation-harness and Inspect run here (offline: the project's stub, Inspect's mock model); promptfoo's file is
one promptfoo 0.121.20 wrote (tests/ingest/fixtures). Files built from each published schema cover the shapes a run
here does not produce (lm-eval's older ``arguments``, ``.jsonl.gz``, the Batch API's input and output lines, a plain
CSV). Each has malformed records: the sample count, ids, model and the first and last responses equal the source's;
every record left out is in the report with its line."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline.ingest.checkpoints import read_checkpoint
from eval_pipeline.ingest.importers import ImportFailure, Mapping, Request, import_file
from eval_pipeline.ingest.validation import validate_file
from eval_pipeline.rubrics import load_rubrics

RUBRIC = "empathetic_dialogue"
CLI = str(Path(sys.executable).with_name("eval-pipeline"))
SITUATIONS = [f"I have been feeling overwhelmed at work lately, situation {i}." for i in range(10)]
REPLIES = [f"That sounds really hard; it makes sense you feel this way ({i})." for i in range(10)]


@pytest.fixture(scope="module")
def rubrics():
    return {r.name: r for r in load_rubrics()}


def _mapping(tmp_path: Path, id_path: str, fields: dict[str, str], name: str = "map.yaml") -> Path:
    path = tmp_path / name
    lines = [f"rubric: {RUBRIC}", f"id: {id_path}", "fields:"] + [f"  {k}: {v}" for k, v in fields.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _import(tmp_path, rubrics, fmt, source, mapping, extra=None, model=None, checkpoint="ckpt-imp", **kw):
    request = Request(fmt, source, mapping, checkpoint, extra, model=model, **kw)
    out = import_file(request, rubrics, tmp_path / "ckpts")
    return out.path, out.unchanged, out.left_out, rubrics[out.rubric]


def _check_folder(target: Path, rubric, ids: list[str], model: str) -> None:
    """The folder is a checkpoint the pipeline reads, its lines all valid for the rubric."""
    ckpt = read_checkpoint(target.parent)
    assert ckpt.model == model and ckpt.file_for(RUBRIC) == target
    result = validate_file(rubric, target, ckpt.checkpoint_id)
    assert list(result.samples.sample_id) == ids and len(result.quarantine) == 0
    lines = [json.loads(x) for x in target.read_text().splitlines()]
    assert [x["sample_id"] for x in lines] == ids


def _lm_eval_line(i: int, shape: str, resp: str | None) -> dict:
    prompt = f"Reply kindly.\n{SITUATIONS[i]}"
    arguments = {"gen_args_0": {"arg_0": prompt, "arg_1": {"until": ["\n"]}}} if shape == "new" else [[prompt, {}]]
    return {
        "doc_id": i,
        "doc": {"situation": SITUATIONS[i], "topic": "work stress"},
        "target": "",
        "arguments": arguments,
        "resps": [[resp]] if resp is not None else [[]],
        "filtered_resps": [resp] if resp is not None else [],
        "filter": "none",
        "metrics": ["bleu"],
        "doc_hash": "x",
        "prompt_hash": "y",
        "target_hash": "z",
    }


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_lm_evaluation_harness_samples_in_both_argument_shapes(tmp_path, rubrics, suffix):
    lines = [json.dumps(_lm_eval_line(i, "new" if i % 2 else "old", REPLIES[i])) for i in range(4)]
    lines.insert(2, "{not json")  # line 3: a broken line
    lines.append(json.dumps(_lm_eval_line(4, "new", None)))  # line 6: no response
    lines.append(json.dumps(_lm_eval_line(1, "new", "again")))  # line 7: doc 1 again
    text = "\n".join(lines) + "\n"
    source = tmp_path / f"samples_empathy_2026-12-06T10-00-00{suffix}"
    if suffix.endswith(".gz"):
        source.write_bytes(gzip.compress(text.encode()))
    else:
        source.write_text(text)
    (tmp_path / "results_2026-12-06T10-00-00.json").write_text(
        json.dumps({"model_name": "org/kind-7b", "config": {"model_args": "pretrained=org/kind-7b,revision=abc123"}})
    )
    mapping = _mapping(
        tmp_path, "doc_id", {"user_statement": "doc.situation", "topic": "doc.topic", "response": "response"}
    )
    target, unchanged, report, rubric = _import(tmp_path, rubrics, "lm-eval", source, mapping)
    assert not unchanged
    _check_folder(target, rubric, ["0", "1", "2", "3"], "org/kind-7b@abc123")
    first, last = (json.loads(x) for x in target.read_text().splitlines()[::3])
    assert first["response"] == REPLIES[0] and last["response"] == REPLIES[3]
    assert [(r["line"], r["reason"].split(":")[0].split(" (")[0]) for r in report] == [
        (3, "not JSON"),
        (6, "no response"),
        (7, "duplicate id '1'"),
    ]


def test_the_batch_api_pairs_requests_and_answers_and_reports_the_rest(tmp_path, rubrics):
    def request(i: int) -> dict:
        messages = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": SITUATIONS[i]}]
        return {"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "kind-7b-chat", "messages": messages}}  # fmt: skip

    def answer(i: int, status: int = 200, text: str | None = None) -> dict:
        body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text or REPLIES[i]}}]}
        return {"id": f"batch_req_{i}", "custom_id": f"req-{i}", "response": {"status_code": status, "body": body},
                "error": None}  # fmt: skip

    source, output = tmp_path / "input.jsonl", tmp_path / "output.jsonl"
    source.write_text("".join(json.dumps(request(i)) + "\n" for i in range(5)))
    answers = [answer(3), answer(0), answer(2, status=500), answer(1), answer(9)]  # none for req-4; req-9 unasked
    output.write_text("".join(json.dumps(a) + "\n" for a in answers))
    mapping = _mapping(tmp_path, "custom_id", {"user_statement": "prompt", "response": "response"})
    target, _, report, rubric = _import(tmp_path, rubrics, "openai-batch", source, mapping, extra=output)
    _check_folder(target, rubric, ["req-0", "req-1", "req-3"], "kind-7b-chat")
    reasons = sorted((r["source"], r["line"], r["reason"].split(" (")[0]) for r in report)
    assert reasons == [
        ("input.jsonl", 3, "status 500"),
        ("input.jsonl", 5, "no answer to 'req-4' in output.jsonl"),
        ("output.jsonl", 5, "an answer to 'req-9', which no request asked"),
    ]


def test_promptfoo_results_and_an_error_case(tmp_path, rubrics):
    results = [
        {"id": f"r{i}", "promptIdx": 0, "testIdx": i, "prompt": {"raw": f"Reply: {SITUATIONS[i]}", "label": "p"},
         "vars": {"situation": SITUATIONS[i]}, "provider": {"id": "openai:kind-7b"},
         "response": {"output": REPLIES[i]}, "error": None, "success": True}
        for i in range(3)
    ]  # fmt: skip
    results[1] = {**results[1], "error": "rate limited", "response": None}
    source = tmp_path / "results.json"
    source.write_text(json.dumps({"evalId": "e1", "results": {"version": 3, "results": results}}))
    mapping = _mapping(tmp_path, "id", {"user_statement": "vars.situation", "response": "response"})
    target, _, report, rubric = _import(tmp_path, rubrics, "promptfoo", source, mapping)
    _check_folder(target, rubric, ["0-0", "2-0"], "openai:kind-7b")
    assert [(r["line"], r["reason"]) for r in report] == [(2, "promptfoo recorded an error: rate limited")]


def test_a_plain_table_reimported_is_a_no_op_and_another_needs_replace(tmp_path, rubrics):
    import csv

    source = tmp_path / "outputs.csv"
    rows_ = [
        ["id", "statement", "reply"],
        *([f"e{i}", SITUATIONS[i], REPLIES[i]] for i in range(3)),
        ["e3", "No reply.", ""],
    ]

    def write(table: list[list[str]]) -> None:
        with source.open("w", newline="") as fh:
            csv.writer(fh).writerows(table)

    write(rows_)
    mapping = _mapping(tmp_path, "id", {"user_statement": "statement", "response": "reply"})
    target, unchanged, report, rubric = _import(tmp_path, rubrics, "table", source, mapping, model="kind-7b")
    _check_folder(target, rubric, ["e0", "e1", "e2"], "kind-7b")
    assert [(r["line"], r["reason"]) for r in report] == [(5, "no 'reply' for the field 'response'")]
    again = _import(tmp_path, rubrics, "table", source, mapping, model="kind-7b")
    assert again[1] is True  # the same records: nothing written
    write(rows_[:3])
    with pytest.raises(ImportFailure, match="already exists and has empathetic_dialogue.jsonl: give --replace"):
        _import(tmp_path, rubrics, "table", source, mapping, model="kind-7b")


def test_a_mapping_naming_a_field_the_rubric_lacks_fails_naming_the_file_and_the_field(tmp_path, rubrics):
    mapping = _mapping(tmp_path, "id", {"user_statment": "statement", "response": "reply"}, "typo.yaml")
    with pytest.raises(ImportFailure, match=r"typo.yaml: 'user_statment' is not an input field of rubric"):
        Mapping.load(mapping, rubrics)
    short = _mapping(tmp_path, "id", {"response": "reply"}, "short.yaml")
    with pytest.raises(ImportFailure, match=r"short.yaml: rubric empathetic_dialogue's field 'user_statement' is"):
        Mapping.load(short, rubrics)


def test_the_command_writes_the_folder_and_fails_in_one_line(tmp_path):
    source = tmp_path / "outputs.jsonl"
    source.write_text("".join(json.dumps({"k": f"a{i}", "s": SITUATIONS[i], "r": REPLIES[i]}) + "\n" for i in range(3)))
    mapping = _mapping(tmp_path, "k", {"user_statement": "s", "response": "r"})
    env = {**os.environ, "EVAL_CHECKPOINT_DIR": str(tmp_path / "ckpts")}
    base = [CLI, "import", "table", str(source), "--checkpoint", "ckpt-cli", "--map", str(mapping)]
    done = subprocess.run([*base, "--model", "kind-7b"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 sample(s) of outputs.jsonl for empathetic_dialogue, model kind-7b: wrote" in done.stdout
    assert (tmp_path / "ckpts" / "ckpt-cli" / "checkpoint.json").is_file()
    no_model = subprocess.run([*base[:5], "ckpt-two", *base[6:]], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert no_model.returncode == 2 and len(no_model.stderr.strip().splitlines()) == 1
    assert "give --model" in no_model.stderr and "Traceback" not in no_model.stderr


INSPECT_TASK = """
import sys
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate

SITUATIONS = {situations!r}
REPLIES = {replies!r}


def answer(messages, tools, tool_choice, config):
    i = SITUATIONS.index(messages[-1].text)
    if i == 2:
        raise RuntimeError("the model's server fell over")
    out = ModelOutput.from_content(model="mockllm/model", content=REPLIES[i])
    out.usage = ModelUsage(input_tokens=10, output_tokens=10, total_tokens=20)  # no tokenizer download
    return out


task = Task(
    dataset=[
        Sample(input=s, target="", id=f"case-{{i}}", metadata={{"topic": "work"}}) for i, s in enumerate(SITUATIONS)
    ],
    solver=generate(),
    scorer=match(),
)
model = get_model("mockllm/model", custom_outputs=answer)
(log,) = eval(task, model=model, log_dir=sys.argv[1], display="none", fail_on_error=False, log_format=sys.argv[2])
print(log.location)
"""


@pytest.mark.parametrize("log_format", ["eval", "json"])
def test_an_inspect_log_written_by_inspect_itself(tmp_path, rubrics, log_format):
    """Inspect runs a task with its mock model here (a sample's call fails, as a server's may); the log, in either
    of Inspect's formats, imports with the ids, model and responses Inspect recorded, the failed sample reported."""
    pytest.importorskip("inspect_ai")
    script = tmp_path / "task.py"
    script.write_text(INSPECT_TASK.format(situations=SITUATIONS[:5], replies=REPLIES[:5]))
    env = {**os.environ, "INSPECT_LOG_DIR": str(tmp_path / "logs"), "INSPECT_DISPLAY": "none"}
    ran = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "logs"), log_format],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    (log,) = (tmp_path / "logs").glob(f"*.{log_format}")
    mapping = _mapping(tmp_path, "id", {"user_statement": "input", "topic": "metadata.topic", "response": "response"})
    target, _, report, rubric = _import(tmp_path, rubrics, "inspect", log, mapping)
    _check_folder(target, rubric, ["case-0", "case-1", "case-3", "case-4"], "mockllm/model")
    lines = [json.loads(x) for x in target.read_text().splitlines()]
    assert lines[0]["response"] == REPLIES[0] and lines[-1]["response"] == REPLIES[4]
    assert lines[0]["user_statement"] == SITUATIONS[0] and lines[0]["topic"] == "work"
    assert [(r["line"], r["reason"].split(":")[0]) for r in report] == [(3, "the sample failed in Inspect")]

    broken = tmp_path / f"broken.{log_format}"
    broken.write_bytes(log.read_bytes()[: len(log.read_bytes()) // 2])
    with pytest.raises(ImportFailure, match=r"broken\.\w+: not an Inspect eval log"):
        _import(tmp_path, rubrics, "inspect", broken, mapping, checkpoint="ckpt-broken")


def test_a_judge_section_or_a_folder_declaration_that_is_wrong_fails_naming_the_file_and_the_key(tmp_path, rubrics):
    from eval_pipeline.ingest.importers.folder import declarations

    base = _mapping(tmp_path, "id", {"user_statement": "q", "response": "a"}).read_text()
    wrong = tmp_path / "judge.yaml"
    wrong.write_text(base + "judge:\n  model: g\n  prompt: p\n  scores:\n    empathy: s.e\n")
    with pytest.raises(ImportFailure, match=r"judge\.yaml: judge: 'empathy' is not a judged dimension"):
        Mapping.load(wrong, rubrics)
    wrong.write_text(base + "judge:\n  prompt: p\n  scores:\n    emotion: s.e\n")
    with pytest.raises(ImportFailure, match=r"judge\.yaml: judge: 'model' must say who judged"):
        Mapping.load(wrong, rubrics)

    (tmp_path / "imports" / "a").mkdir(parents=True)
    (tmp_path / "imports" / "a" / "import.yaml").write_text("format: lm-eval\nmap: m.yaml\ncheckpoint: fixed\n")
    (tmp_path / "imports" / "b").mkdir()
    (tmp_path / "imports" / "b" / "import.yaml").write_text("format: harness-x\nmap: m.yaml\n")
    found, refused = declarations(tmp_path / "imports")
    assert found == []
    assert "a/import.yaml: 'checkpoint' must be a template" in refused[0]
    assert "b/import.yaml: 'format' must be one of inspect, lm-eval" in refused[1]


FIXTURES = Path(__file__).parent / "fixtures"


def test_a_results_file_promptfoo_itself_wrote(tmp_path, rubrics):
    """``promptfoo eval -c promptfoo-0.121.20-echo-config.yaml -o results.json`` (promptfoo 0.121.20 from npm, its
    ``echo`` provider, offline): promptfoo is 1.4 GB of node modules, too much to install for the suite, so its file is
    kept here as it wrote it; a malformed variant is made from it (a result with an error, one not an object)."""
    real = FIXTURES / "promptfoo-0.121.20-echo-results.json"
    mapping = _mapping(
        tmp_path, "id", {"user_statement": "vars.situation", "topic": "vars.topic", "response": "response"}
    )
    target, _, report, rubric = _import(tmp_path, rubrics, "promptfoo", real, mapping)
    data = json.loads(real.read_text())["results"]["results"]
    _check_folder(target, rubric, ["0-0", "1-0", "2-0"], "echo")
    lines = [json.loads(x) for x in target.read_text().splitlines()]
    assert (
        lines[0]["response"] == data[0]["response"]["output"]
        and lines[-1]["response"] == data[-1]["response"]["output"]
    )
    assert report == []

    whole = json.loads(real.read_text())
    whole["results"]["results"][1]["error"] = "API error: 429"
    whole["results"]["results"].append("not a result")
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(whole))
    target, _, report, rubric = _import(tmp_path, rubrics, "promptfoo", broken, mapping, checkpoint="ckpt-broken")
    _check_folder(target, rubric, ["0-0", "2-0"], "echo")
    assert [(r["line"], r["reason"]) for r in report] == [
        (2, "promptfoo recorded an error: API error: 429"),
        (4, "result 4 is not an object"),
    ]


LM_EVAL_TASK = """task: empathy_local
dataset_path: json
dataset_kwargs:
  data_files:
    test: {docs}
test_split: test
output_type: generate_until
doc_to_text: "{{{{situation}}}}"
doc_to_target: ""
generation_kwargs:
  until: []
  max_gen_toks: 64
metric_list:
  - metric: bypass
"""


def test_samples_lm_evaluation_harness_itself_wrote(tmp_path, rubrics):
    """lm-evaluation-harness (from PyPI, no torch) runs a local task against the project's OpenAI-protocol stub as a
    chat model, offline, with ``--log_samples``; its samples file imports with the docs' ids, the run's model and the
    responses it logged; a malformed copy (a broken line, a document without a response) reports both lines."""
    pytest.importorskip("lm_eval")
    from eval_pipeline.devtools.openai_stub import StubServer

    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(json.dumps({"id": f"d{i}", "situation": SITUATIONS[i], "topic": "work"}) + "\n" for i in range(5))
    )
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "empathy_local.yaml").write_text(LM_EVAL_TASK.format(docs=docs))
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    with StubServer() as stub:
        args = f"model=kind-7b,base_url={stub.base_url}/chat/completions,tokenizer_backend=None"
        ran = subprocess.run(
            [str(Path(sys.executable).with_name("lm_eval")), "run", "--model", "local-chat-completions",
             "--model_args", args, "--apply_chat_template", "--include_path", str(tmp_path / "tasks"),
             "--tasks", "empathy_local", "--log_samples", "--output_path", str(tmp_path / "out")],
            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
        )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    (source,) = (tmp_path / "out" / "kind-7b").glob("samples_empathy_local_*.jsonl")
    logged = [json.loads(x) for x in source.read_text().splitlines()]
    mapping = _mapping(
        tmp_path, "doc.id", {"user_statement": "messages.0.content", "topic": "doc.topic", "response": "response"}
    )
    target, _, report, rubric = _import(tmp_path, rubrics, "lm-eval", source, mapping)
    _check_folder(target, rubric, [f"d{i}" for i in range(5)], "kind-7b")
    lines = [json.loads(x) for x in target.read_text().splitlines()]
    assert lines[0]["response"] == logged[0]["resps"][0][0] and lines[-1]["response"] == logged[-1]["resps"][0][0]
    assert [x["user_statement"] for x in lines] == SITUATIONS[:5]  # the chat messages the harness sent
    assert report == []

    bad = source.with_name(source.name.replace("samples_empathy_local", "samples_empathy_broken"))
    text = source.read_text().splitlines()
    no_response = {**logged[1], "resps": [[]], "filtered_resps": []}
    bad.write_text("\n".join([text[0], "{cut off", json.dumps(no_response), *text[2:]]) + "\n")
    target, _, report, rubric = _import(tmp_path, rubrics, "lm-eval", bad, mapping, checkpoint="ckpt-broken")
    _check_folder(target, rubric, ["d0", "d2", "d3", "d4"], "kind-7b")
    assert [(r["line"], r["reason"].split(":")[0].split(" (")[0]) for r in report] == [
        (2, "not JSON"),
        (3, "no response"),
    ]
