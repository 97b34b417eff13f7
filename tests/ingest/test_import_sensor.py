"""#75, end to end: three revisions of one model land in one lm-evaluation-harness output folder, with the scores of
a judge the team already ran. The import sensor writes them as three checkpoints chained parent to child, the
checkpoint sensor asks for three partitions, and the evaluated lake — with that judge (``EVAL_JUDGE=imported``) as
the judge of record — equals, table for table, the lake of the same data written as native checkpoint folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.ingest.checkpoints import read_checkpoint
from eval_pipeline.runtime.runner import materialize_checkpoints
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import RUBRIC_DIR, write_checkpoint
from tests.helpers.lakes import contents, differences

RUBRIC = "empathetic_dialogue"
DIMS = ["emotion", "validation", "helpfulness", "safety", "overall"]
TIMES = ["2026-11-01T09-00-00.123456", "2026-11-08T09-00-00.123456", "2026-11-15T09-00-00.123456"]
JUDGE = {"model": "grader-gpt-4o", "prompt": "grader-v3", "date": "2026-11-20"}
N = 12


def _score(rev: int, i: int, d: int):
    if (rev, i, d) == (1, 3, 2):
        return "n/a"  # a bad cell: that one score missing with its reason, the sample kept
    return 1 + (i * 7 + d * 3 + rev * 2) % 5


def _line(rev: int, i: int) -> dict:
    line = {
        "doc_id": i,
        "doc": {"situation": f"I keep failing my exams and I feel useless, case {i}.", "topic": "study"},
        "target": "",
        "arguments": {"gen_args_0": {"arg_0": f"Respond.\ncase {i}", "arg_1": {"until": []}}},
        "resps": [[f"Revision {rev}: that sounds exhausting; failing is not who you are ({i})."]],
        "filtered_resps": [f"Revision {rev}: that sounds exhausting; failing is not who you are ({i})."],
        "filter": "none",
        "metrics": ["judge"],
    }
    return line | {f"judge_{dim}": _score(rev, i, d) for d, dim in enumerate(DIMS)}


def _harness_folder(root: Path, maps: Path) -> Path:
    folder = root / "kind"
    folder.mkdir(parents=True)
    for rev, stamp in enumerate(TIMES):
        (folder / f"samples_empathy_{stamp}.jsonl").write_text(
            "".join(json.dumps(_line(rev, i)) + "\n" for i in range(N))
        )
        args = f"pretrained=org/kind-7b,revision=r{rev + 1}"
        (folder / f"results_{stamp}.json").write_text(
            json.dumps({"model_name": "org/kind-7b", "config": {"model_args": args}})
        )
    maps.mkdir()
    scores = "".join(f"    {dim}: judge_{dim}\n" for dim in DIMS)
    (maps / "empathy.yaml").write_text(
        f"rubric: {RUBRIC}\nid: doc_id\nfields:\n  user_statement: doc.situation\n  topic: doc.topic\n"
        f"  response: response\njudge:\n  model: {JUDGE['model']}\n  prompt: {JUDGE['prompt']}\n"
        f"  date: {JUDGE['date']}\n  scores:\n{scores}"
    )
    (folder / "import.yaml").write_text("format: lm-eval\nmap: ../../maps/empathy.yaml\ncheckpoint: kind-{n:03d}\n")
    return folder


def _native(root: Path) -> list[str]:
    """The same data as native checkpoint folders, the judge's scores written by hand (ingest.judged)."""
    ids = []
    for rev, stamp in enumerate(TIMES):
        ckpt = f"kind-{rev + 1:03d}"
        rows = [
            {"response": _line(rev, i)["resps"][0][0], "sample_id": str(i), "topic": "study",
             "user_statement": _line(rev, i)["doc"]["situation"]}
            for i in range(N)
        ]  # fmt: skip
        day = stamp[:10]
        manifest = {
            "model": f"org/kind-7b@r{rev + 1}",
            "created_at": f"{day}T09:00:00Z",
            "parent": ids[-1] if ids else None,
        }
        folder = write_checkpoint(root, ckpt, {RUBRIC: rows}, manifest)
        scores = {str(i): {dim: _score(rev, i, d) for d, dim in enumerate(DIMS)} for i in range(N)}
        (folder / f"{RUBRIC}.judge.json").write_text(json.dumps(JUDGE | {"scores": scores}))
        ids.append(ckpt)
    return ids


def _ratings(root: Path) -> None:
    """Two people rated the last revision: near the judge, one point off now and then."""
    folder = root / RUBRIC
    folder.mkdir(parents=True)
    lines = ["sample_id,evaluator," + ",".join(DIMS) + ",checkpoint"]
    for who, shift in (("Evaluator1", 0), ("Evaluator2", 1)):
        for i in range(N):
            cells = [max(1, min(5, _score(2, i, d) + (1 if (i + d + shift) % 4 == 0 else 0))) for d in range(len(DIMS))]
            lines.append(f"{i},{who}," + ",".join(map(str, cells)) + ",kind-003")
    (folder / "kind-003.csv").write_text("\n".join(lines) + "\n")


def _tick(defs, instance, name, cursor=None):
    ctx = dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor)
    return defs.resolve_sensor_def(name)(ctx)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_three_revisions_imported_by_the_sensor_evaluate_as_their_native_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_JUDGE", "imported")
    imports, maps = tmp_path / "imports", tmp_path / "maps"
    folder = _harness_folder(imports, maps)
    old = time.time() - 60
    for p in folder.iterdir():
        os.utime(p, (old, old))
    monkeypatch.setenv("EVAL_IMPORT_DIR", str(imports))
    _ratings(tmp_path / "ratings")
    monkeypatch.setenv("EVAL_RATINGS_DIR", str(tmp_path / "ratings"))
    lake_a = f"ducklake:sqlite:{tmp_path / 'a' / 'catalog.sqlite'}"
    ckpts_a = tmp_path / "a_ckpts"
    defs = build_definitions(RUBRIC_DIR, lake_a, str(ckpts_a))
    with dg.instance_for_test() as instance:
        first = _tick(defs, instance, "import_sensor")
        assert not ckpts_a.exists()  # a file is taken once it stayed the same for a tick
        second = _tick(defs, instance, "import_sensor", first.cursor)
        assert sorted(p.name for p in ckpts_a.iterdir()) == ["kind-001", "kind-002", "kind-003"]
        chain = {c: read_checkpoint(ckpts_a / c) for c in ("kind-001", "kind-002", "kind-003")}
        assert [chain[c].parent for c in chain] == [None, "kind-001", "kind-002"]
        assert [chain[c].model for c in chain] == ["org/kind-7b@r1", "org/kind-7b@r2", "org/kind-7b@r3"]
        third = _tick(defs, instance, "import_sensor", second.cursor)
        assert third.cursor == second.cursor and "nothing imported" in third.skip_reason.skip_message

        requested = _tick(defs, instance, "checkpoint_sensor")
        keys = [r.partition_key for r in requested.run_requests]
        assert keys == ["kind-001", "kind-002", "kind-003"]
        outcomes = materialize_checkpoints(defs, instance, keys, log_level="ERROR")
        assert all(o.success for o in outcomes), [o.failures for o in outcomes]

    lake_b = f"ducklake:sqlite:{tmp_path / 'b' / 'catalog.sqlite'}"
    ckpts_b = tmp_path / "b_ckpts"
    native = _native(ckpts_b)
    with dg.instance_for_test() as instance:
        outcomes = materialize_checkpoints(
            build_definitions(RUBRIC_DIR, lake_b, str(ckpts_b)), instance, native, log_level="ERROR"
        )
        assert all(o.success for o in outcomes)

    a, b = contents(Warehouse(lake_a)), contents(Warehouse(lake_b))
    for found in (a, b):
        found["main.checkpoints"] = found["main.checkpoints"].drop(columns=["path"])
    assert differences(a, b) == []

    # the judge of record is the team's own, its scores as they came, a bad cell missing with its reason
    who = a[f"{RUBRIC}.judge_identity"]
    assert set(who.label) == {"grader-gpt-4o (imported, prompt grader-v3, judged 2026-11-20)"}
    panel = a[f"{RUBRIC}.judge_scores"]
    panel = panel[panel.judge == "panel"].set_index(["checkpoint_id", "sample_id", "dimension"])
    assert float(panel.loc[("kind-003", "5", "safety"), "score"]) == _score(2, 5, 3)
    bad = panel.loc[("kind-002", "3", "helpfulness")]
    assert bad.status == "missing" and "not a number" in bad.reason
    assert int((panel.status == "ok").sum()) == 3 * N * len(DIMS) - 1
    # people's agreement with it, and the parent comparisons (the same judge on both sides), as for any judge
    agreement = a[f"{RUBRIC}.agreement"].set_index(["checkpoint_id", "dimension", "statistic", "raters"])
    kappa = agreement.loc[("kind-003", "emotion", "cohen_kappa_quadratic", "judge~human_mean")]
    assert kappa.n_items == "12" and float(kappa.value) > 0.8
    comparison = a[f"{RUBRIC}.comparison"].set_index(["checkpoint_id", "score"])
    assert comparison.loc[("kind-002", "helpfulness"), "parent_id"] == "kind-001"
    assert comparison.loc[("kind-002", "helpfulness"), "n_pairs"] == "11"  # the bad cell's pair left out
    assert comparison.loc[("kind-003", "emotion"), "n_pairs"] == str(N)

    # import, then export: every field the mapping names comes back as the harness wrote it
    out = tmp_path / "export"
    cli = str(Path(sys.executable).with_name("eval-pipeline"))
    done = subprocess.run(
        [cli, "export", "--checkpoint", "kind-003", "--rubric", RUBRIC, "--format", "json", "--out", str(out),
         "--warehouse", lake_a],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    samples = {r["sample_id"]: r for r in map(json.loads, (out / RUBRIC / "samples.jsonl").read_text().splitlines())}
    assert len(samples) == N
    for i in range(N):
        source, got = _line(2, i), samples[str(i)]
        assert got["user_statement"] == source["doc"]["situation"] and got["topic"] == source["doc"]["topic"]
        assert got["response"] == source["resps"][0][0]
    cells = [json.loads(x) for x in (out / RUBRIC / "imported_scores.jsonl").read_text().splitlines()]
    assert {(c["sample_id"], c["dimension"]): json.loads(c["value"]) for c in cells} == {
        (str(i), dim): _line(2, i)[f"judge_{dim}"] for i in range(N) for dim in DIMS
    }
    (manifest,) = [json.loads(x) for x in (out / "main" / "checkpoints.jsonl").read_text().splitlines()]
    assert manifest["model"] == "org/kind-7b@r3" and manifest["parent"] == "kind-002"


def test_an_import_its_mapping_refused_is_imported_once_the_mapping_is_mended(tmp_path, monkeypatch):
    """A mapping naming a field the rubric lacks refuses the import in one line of the sensor's log; the refusal is
    not asked again while nothing changed, and mending the mapping (not the harness's file) imports it."""
    imports, maps = tmp_path / "imports", tmp_path / "maps"
    folder = _harness_folder(imports, maps)
    good = (maps / "empathy.yaml").read_text()
    (maps / "empathy.yaml").write_text(good.replace("user_statement:", "user_statment:"))
    old = time.time() - 60
    for p in [*folder.iterdir(), maps / "empathy.yaml"]:
        os.utime(p, (old, old))
    monkeypatch.setenv("EVAL_IMPORT_DIR", str(imports))
    ckpts = tmp_path / "ckpts"
    defs = build_definitions(RUBRIC_DIR, f"ducklake:sqlite:{tmp_path / 'lake.sqlite'}", str(ckpts))
    with dg.instance_for_test() as instance:
        cursor = None
        for _ in range(3):
            cursor = _tick(defs, instance, "import_sensor", cursor).cursor
        assert not ckpts.exists()  # refused, and not asked again
        (maps / "empathy.yaml").write_text(good)
        os.utime(maps / "empathy.yaml", (old + 1, old + 1))
        for _ in range(2):
            cursor = _tick(defs, instance, "import_sensor", cursor).cursor
        assert sorted(p.name for p in ckpts.iterdir()) == ["kind-001", "kind-002", "kind-003"]
