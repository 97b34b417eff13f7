"""What grows is registered: a gate kind is one registration, checked when the rubric loads, evaluated, shown
as an asset check; every warehouse step, gates included, takes turns through the warehouse pool."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from eval_pipeline.core.config import RubricConfigError
from eval_pipeline.defs.build import build_definitions
from eval_pipeline.defs.factory import rubric_definitions
from eval_pipeline.rubrics import load_rubric
from eval_pipeline.scoring.gates import GATES, GateResult, GateSpec, evaluate_gates, gate, load_kinds
from tests.conftest import RUBRIC_DIR
from tests.helpers.judges import judge_named


@pytest.fixture
def max_missing_kind():
    """A new gate kind, registered in one place, with a required field of its own."""
    load_kinds()

    class MaxMissingSpec(GateSpec):
        score: str

    @gate("max_missing_share", spec=MaxMissingSpec)
    def max_missing_share(g: MaxMissingSpec, rubric, scores: pd.DataFrame, inputs) -> GateResult:
        share = float(scores[g.score].isna().mean()) if len(scores) else 1.0
        return GateResult(
            g.name,
            g.kind,
            share,
            g.threshold,
            share <= g.threshold,
            len(scores),
            f"{share:.0%} of {g.score} missing (at most {g.threshold:.0%})",
        )

    yield
    del GATES["max_missing_share"]


def _rubric_with_gate(tmp_path: Path, extra_gate: dict) -> Path:
    data = yaml.safe_load((RUBRIC_DIR / "empathetic_dialogue.yaml").read_text())
    data["gates"].append(extra_gate)
    path = tmp_path / "empathetic_dialogue.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_new_gate_kind_is_one_registration(tmp_path, max_missing_kind):
    path = _rubric_with_gate(
        tmp_path, {"name": "few_missing", "kind": "max_missing_share", "score": "safety", "threshold": 0.25}
    )
    rubric = load_rubric(path)
    scores = pd.DataFrame({"safety": [5.0, None, 4.0, 3.0]})
    row = evaluate_gates(rubric, "c", scores).set_index("gate").loc["few_missing"]
    assert row.passed and row.value == pytest.approx(0.25) and "25% of safety missing" in row.reason
    checks = {k.name for c in rubric_definitions(rubric).asset_checks or [] for k in c.check_keys}
    assert "few_missing" in checks


def test_a_gate_missing_a_field_its_kind_needs_fails_at_load(tmp_path, max_missing_kind):
    path = _rubric_with_gate(tmp_path, {"name": "few_missing", "kind": "max_missing_share", "threshold": 0.25})
    with pytest.raises(RubricConfigError) as exc:
        load_rubric(path)
    assert "field 'gates.few_missing.score': Field required (gate kind 'max_missing_share')" in str(exc.value)


@pytest.mark.parametrize(
    "bad_gate, problem",
    [
        ({"name": "mean_len", "kind": "metric_min", "threshold": 1}, "score"),
        ({"name": "ok_share", "kind": "score_share", "score": "safety", "threshold": 0.5}, "values"),
        ({"name": "typo", "kind": "metric_mni", "score": "safety", "threshold": 1}, "unknown gate kind 'metric_mni'"),
    ],
)
def test_built_in_gate_kinds_check_their_fields_at_load(tmp_path, bad_gate, problem):
    with pytest.raises(RubricConfigError) as exc:
        load_rubric(_rubric_with_gate(tmp_path, bad_gate))
    assert f"field 'gates.{bad_gate['name']}" in str(exc.value) and problem in str(exc.value)


def test_no_step_waits_on_a_pool_and_every_rubric_has_its_gates(tmp_path):
    """Neither backend needs a step pool (a lake's writers overlap; a file is one process's for a whole run), so
    no step can wait on a slot a dead run left."""
    defs = build_definitions(RUBRIC_DIR, str(tmp_path / "w.duckdb"), str(tmp_path))
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        assert not set(graph.get(key).pools or []), key
    gates = [k for k in graph.get_all_asset_keys() if k.path[-1] == "gates"]
    assert len(gates) == 5  # the gates asset used to bypass the pool (its own @dg.asset)


def test_one_broken_rubric_file_leaves_the_other_groups_and_their_sensor_in_the_code_location(tmp_path):
    """#34.6: the code location loads leniently: the broken file is its group's one asset, showing the problems
    and failing when materialized; the CLI's strict load still refuses it."""
    import shutil

    import dagster as dg

    from eval_pipeline.core.config import RubricConfigError
    from eval_pipeline.rubrics import load_rubrics

    shutil.copy(RUBRIC_DIR / "kg_qa.yaml", tmp_path / "kg_qa.yaml")
    (tmp_path / "broken.yaml").write_text("name: broken\nscale: {min: 5, max: 1}\n")
    defs = build_definitions(tmp_path, str(tmp_path / "w.duckdb"), str(tmp_path), lenient=True)
    keys = defs.resolve_asset_graph().get_all_asset_keys()
    assert {k.path[0] for k in keys} == {"kg_qa", "broken"}
    broken = dg.AssetKey(["broken", "rubric_config_error"])
    assert "invalid rubric config" in defs.resolve_assets_def(broken).descriptions_by_key[broken]
    assert any(s.name.startswith("checkpoint") for s in defs.sensors or [])
    result = dg.materialize([defs.resolve_assets_def(broken)], raise_on_error=False)
    assert not result.success
    with pytest.raises(RubricConfigError, match="broken.yaml"):
        load_rubrics(tmp_path)


def test_every_unit_kind_is_one_registry_with_the_same_contract():
    """#35: four registry patterns (pkgutil loops, a union built at import, a _loaded global) are one
    ``Registry[T]``: registered by a decorator, loaded on first read, a repeat or an unknown name said plainly."""
    from eval_pipeline.core.derived import KINDS
    from eval_pipeline.core.registry import Registry
    from eval_pipeline.judge.backends import BACKENDS
    from eval_pipeline.judge.heuristic import FEATURES
    from eval_pipeline.metrics import METRICS

    units = ((METRICS, "triple_coverage"), (GATES, "regression"), (FEATURES, None), (KINDS, None), (BACKENDS, "openai"))
    for registry, known in units:
        assert isinstance(registry, Registry) and len(registry) > 0
        assert known is None or known in registry
        with pytest.raises(KeyError, match=rf"unknown {registry.kind} 'no_such' \(known: "):
            registry.get_unit("no_such")
        name = next(iter(registry))
        with pytest.raises(ValueError, match="registered twice"):
            registry.add(name, registry[name])


def test_a_judge_backend_is_one_registration(tmp_path):
    """#35: a judge backend is a class registered in judge.backends: the runner, the identity recorded with the
    scores and the extraction step ask the registry, never a mode string."""
    from eval_pipeline.judge.backends import BACKENDS, backend_for, identity_of
    from eval_pipeline.judge.identity import JudgeIdentity
    from eval_pipeline.judge.rows import score_row
    from eval_pipeline.judge.runner import judge_samples
    from eval_pipeline.storage.warehouse import Warehouse

    rubric = load_rubric(RUBRIC_DIR / "empathetic_dialogue.yaml")

    class Threes:
        calls_out = False

        def identity(self, rubric, config, at=None):
            return JudgeIdentity("threes", "always-3", "", rubric.judge_version, "{}", "chosen", "{}")

        def score(self, job):
            rubric, ckpt, records = job.rubric, job.checkpoint, job.records
            job.stats.judges, job.stats.judge_kind, job.stats.prompts = ["threes"], "rule", len(records)
            return [
                score_row(
                    checkpoint_id=ckpt,
                    sample_id=r["sample_id"],
                    judge="threes",
                    judge_kind="rule",
                    model="always-3",
                    dimension=d.key,
                    kind="dimension",
                    score=3.0,
                    reason=None,
                )  # fmt: skip
                for r in records
                for d in rubric.judged_dimensions
            ]

    BACKENDS.add("threes", Threes)
    try:
        records = [dict(sample_id=f"s{i}", topic="t", user_statement="hi", response="hello") for i in range(3)]
        df, stats = judge_samples(
            rubric, "c", records, Warehouse(str(tmp_path / "w.duckdb")), config=judge_named("threes")
        )
        panel = df[df.judge == "panel"]
        assert len(panel) == 3 * len(rubric.judged_dimensions) and (panel.score == 3.0).all()
        assert stats.judges == ["threes"] and identity_of(rubric, judge_named("threes")).models == "always-3"
        assert backend_for(judge_named("threes")).calls_out is False
    finally:
        BACKENDS._units.pop("threes")
    with pytest.raises(ValueError, match=r"EVAL_JUDGE must be one of heuristic, imported, openai, got 'threes'"):
        backend_for(judge_named("threes"))
