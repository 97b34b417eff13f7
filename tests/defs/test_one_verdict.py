"""One verdict whatever the path (#59): the sample checkpoints materialized the Dagster way — one run per partition,
each checkpoint first once (the three rotations of their creation order; all six orders were checked when #59 was
resolved, and each costs the suite two minutes), with Dagster's own automation conditions evaluated as the
automation sensor would (between the runs, or only once they are all done) — leave every warehouse table as
`eval-pipeline run` of the three does."""

import shutil
import warnings

import dagster as dg
import pytest

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.runtime.dagster_private import dynamic_partitions_read_once  # evaluations in seconds, not minutes
from eval_pipeline.runtime.runner import materialize_checkpoints
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import ROOT, RUBRIC_DIR, SAMPLE_CHECKPOINTS
from tests.helpers.automation import AutomationSensor, assets_of, partition_run
from tests.helpers.lakes import contents, differences
from tests.helpers.reference import reference_tables

CHECKPOINTS = ["ckpt-0100", "ckpt-0200", "ckpt-0300"]
RUBRIC = "kg_qa"  # rated on all three checkpoints, a judge with repeats, every gate kind that reads a parent


def _defs(tmp_path):
    lake = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    return build_definitions(RUBRIC_DIR, lake, str(SAMPLE_CHECKPOINTS)), lake


def _partition_run(defs, instance, partition, keys=None):
    """The group, or ``keys``, of one partition in one run."""
    selection = dg.AssetSelection.groups(RUBRIC) if keys is None else dg.AssetSelection.assets(*keys)
    partition_run(defs, instance, partition, selection)


@pytest.fixture(scope="module")
def by_the_cli():
    """`eval-pipeline run` of the three: the suite's reference lake (tests/helpers/reference.py), its kg_qa."""
    return reference_tables()


def _schema_only(tables):
    """The rubric's tables and the registered checkpoints (where each lay left out: the reference's project folder
    is not this test's)."""
    out = {t: df for t, df in tables.items() if t.startswith(f"{RUBRIC}.")}
    out["main.checkpoints"] = tables["main.checkpoints"].drop(columns=["path"])
    return out


ROTATIONS = [tuple(CHECKPOINTS[i:] + CHECKPOINTS[:i]) for i in range(len(CHECKPOINTS))]


@pytest.mark.slow
@pytest.mark.timeout(900)  # the module's CLI run and three partition runs, on a machine the rest of the suite loads
@pytest.mark.parametrize("order", ROTATIONS, ids="-".join)
def test_every_order_of_partition_runs_settles_to_the_cli_result(tmp_path, order, by_the_cli):
    defs, lake = _defs(tmp_path)
    ticks_between = order[0] != "ckpt-0100"  # two orders tick after every run, one only once all are done
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("checkpoints", CHECKPOINTS)
        sensor = AutomationSensor(defs, instance)
        for ckpt in order:
            _partition_run(defs, instance, ckpt)
            if ticks_between:
                sensor.tick()
        sensor.settle()
        # each run decided every checkpoint at its end (an earlier one's comparison once its parent came): nothing
        # was left stale for the automation
        assert sensor.runs == 0, sensor.keys
    found = contents(Warehouse(lake))
    assert differences(_schema_only(found), _schema_only(by_the_cli)) == []
    trust = found[f"{RUBRIC}.judge_trust"]
    assert set(trust.n_checkpoints) == {"3"}  # every checkpoint's verdict on the judge pools all three


@pytest.mark.slow
def test_new_ratings_for_one_checkpoint_redecide_all_in_one_run_without_a_judge_call(tmp_path, monkeypatch):
    """A second person's ratings of ckpt-0200, read again as the ratings sensor requests: every checkpoint's pooled
    verdict moves. Dagster's automation decides them all again in one run (the decisions are unpartitioned), never
    asks for judge_scores, and the tables are `eval-pipeline run`'s with the same ratings."""
    ratings = tmp_path / "ratings"
    shutil.copytree(ROOT / "data" / "human_ratings" / RUBRIC, ratings / RUBRIC)
    monkeypatch.setenv("EVAL_RATINGS_DIR", str(ratings))
    defs, lake = _defs(tmp_path)
    with dg.instance_for_test() as instance:
        materialize_checkpoints(defs, instance, CHECKPOINTS, {RUBRIC}, log_level="ERROR")
        sensor = AutomationSensor(defs, instance)
        lines = (ratings / RUBRIC / "ckpt-0200.csv").read_text().splitlines()
        second = [lines[0]] + [line.replace("Evaluator1", "Evaluator9", 1) for line in lines[1:21]]
        (ratings / RUBRIC / "ckpt-0200~Evaluator9.csv").write_text("\n".join(second) + "\n")
        _partition_run(defs, instance, "ckpt-0200", [dg.AssetKey([RUBRIC, "human_ratings"])])
        with warnings.catch_warnings(), dynamic_partitions_read_once(instance):
            warnings.simplefilter("ignore")
            result = dg.evaluate_automation_conditions(defs, instance, cursor=sensor.cursor)
        asked = {k.path[1] for a in assets_of(defs) for k in a.keys if result.get_requested_partitions(k)}
        assert "calibration_pool" in asked
        assert not asked & {"judge_scores", "samples", "raw_outputs", "metrics", "scores"}
        judged = dg.AssetKey([RUBRIC, "judge_scores"])
        before = instance.fetch_materializations(judged, limit=1).records[0].storage_id
        sensor.settle()
        assert sensor.runs == 1, sensor.keys  # one run decided every checkpoint again
        after = dg.AssetRecordsFilter(asset_key=judged, after_storage_id=before)
        assert instance.fetch_materializations(after, limit=10).records == []
        trust = Warehouse(lake).read(RUBRIC, "judge_trust", columns=("checkpoint_id", "n_rated"))
        assert set(trust.checkpoint_id) == set(CHECKPOINTS)
    reference, _ = _defs(tmp_path / "reference")
    ref_lake = f"ducklake:sqlite:{tmp_path / 'reference' / 'lake' / 'catalog.sqlite'}"
    with dg.instance_for_test() as instance:
        materialize_checkpoints(reference, instance, CHECKPOINTS, {RUBRIC}, log_level="ERROR")
    ours, theirs = contents(Warehouse(lake)), contents(Warehouse(ref_lake))
    assert differences(_schema_only(ours), _schema_only(theirs)) == []


def test_the_graph_declares_the_pool_across_checkpoints():
    """Lineage a person browses: the pool reads every checkpoint partition of what it pools, every asset that reads
    across checkpoints depends on one of the two pools, and nothing that calls the judge is automated."""
    defs = build_definitions(RUBRIC_DIR, "unused.duckdb", str(SAMPLE_CHECKPOINTS))
    graph = defs.resolve_asset_graph()
    pool = graph.get(dg.AssetKey([RUBRIC, "calibration_pool"]))
    assert pool.partitions_def is None
    for parent in ("samples", "human_ratings", "judge_scores"):
        mapping = graph.get_partition_mapping(pool.key, dg.AssetKey([RUBRIC, parent]))
        assert isinstance(mapping, dg.AllPartitionMapping)
    assert pool.key in graph.get(dg.AssetKey([RUBRIC, "agreement"])).parent_keys
    lineage = dg.AssetKey([RUBRIC, "checkpoint_lineage"])
    for reader in ("comparison", "length_bias", "gates"):
        assert lineage in graph.get(dg.AssetKey([RUBRIC, reader])).parent_keys
    automated = {k.path[1] for k in graph.get_all_asset_keys() if graph.get(k).automation_condition is not None}
    assert automated == {
        "calibration_pool",
        "agreement",
        "checkpoint_lineage",
        "comparison",
        "ranks",
        "length_bias",
        "gates",
        "verdict",
    }


def test_a_pending_gate_check_says_pending_first_in_the_ui():
    """#73: in the Dagster UI pending gates were yellow "Failed" checks with nothing saying they wait. Dagster's
    checks know only passed and failed; a pending gate's check is a warning whose description says PENDING first."""
    import dagster as dg

    from eval_pipeline.defs.checks import _result

    row = {"value": None, "threshold": 0.6, "n": 0, "passed": False, "status": "pending",
           "reason": "pending: 12 rated samples, 30 needed"}  # fmt: skip
    result = _result("judge_reliability", dg.AssetKey(["kg_qa", "judge_scores"]), row)
    assert result.severity == dg.AssetCheckSeverity.WARN and not result.passed
    assert result.description == "PENDING, not a failure: 12 rated samples, 30 needed"
    failed = _result("metric_min", dg.AssetKey(["kg_qa", "summary"]), {**row, "status": "failed", "reason": "below"})
    assert failed.severity == dg.AssetCheckSeverity.ERROR and failed.description == "below"
