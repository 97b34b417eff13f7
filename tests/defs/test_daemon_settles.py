"""#59, with Dagster alone: a real dagster-daemon (as `make ui` starts it) evaluates three checkpoints, then a fourth
lands, then a person adds ratings for the first. Nothing but the daemon's sensors — the checkpoint sensor, the
ratings sensor and the automation sensor — decides what runs. Once it has settled, every table equals what
`eval-pipeline run` of the four gives with the same ratings, and the re-decided checkpoints were never judged again."""

import json
import os
import shutil
import subprocess
import sys

import dagster as dg
import pytest

from eval_pipeline.defs.automation import settling
from eval_pipeline.defs.build import build_definitions
from eval_pipeline.runtime.runner import materialize_checkpoints
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import ROOT, RUBRIC_DIR, SAMPLE_CHECKPOINTS
from tests.helpers.lakes import contents, differences
from tests.helpers.processes import stop
from tests.helpers.reference import reference_tables
from tests.helpers.waiting import poll

RUBRIC = "kg_qa"
FIRST_THREE = ["ckpt-0100", "ckpt-0200", "ckpt-0300"]


def _land(root, ckpt, source, manifest=None):
    """A complete checkpoint folder, its manifest written last (what the checkpoint sensor waits for)."""
    (root / ckpt).mkdir(parents=True)
    shutil.copy(SAMPLE_CHECKPOINTS / source / f"{RUBRIC}.jsonl", root / ckpt / f"{RUBRIC}.jsonl")
    text = json.dumps(manifest) if manifest else (SAMPLE_CHECKPOINTS / source / "checkpoint.json").read_text()
    (root / ckpt / "checkpoint.json").write_text(text)


def _more_ratings(ratings):
    """A second person's ratings of ckpt-0100's first 20 samples: the first's, one point lower where it can be."""
    lines = (ratings / "ckpt-0100.csv").read_text().splitlines()
    out = [lines[0]]
    for line in lines[1:21]:
        cells = line.split(",")
        cells[1] = "Evaluator9"
        cells[2:7] = [str(max(1, int(c) - 1)) if c.isdigit() else c for c in cells[2:7]]
        out.append(",".join(cells))
    (ratings / "ckpt-0100~Evaluator9.csv").write_text("\n".join(out) + "\n")


def _levels(graph: object, across: list[dg.AssetKey]) -> int:
    """How many levels the chain of assets over every checkpoint has: the longest path among them."""
    depth: dict[dg.AssetKey, int] = {}

    def level(k: dg.AssetKey) -> int:
        if k not in depth:
            parents = [p for p in graph.get(k).parent_keys if p in across]  # type: ignore[attr-defined]
            depth[k] = 1 + max((level(p) for p in parents), default=0)
        return depth[k]

    return max((level(k) for k in across), default=0)


def _settled(instance):
    """Settled as an event (defs/automation.py): no run in flight and the automation sensor evaluated after the
    last one ended and requested nothing."""
    return lambda: settling(instance).settled


def _cli(tmp_path, name, root, ratings, checkpoints, monkeypatch):
    """The tables of `eval-pipeline run` of ``checkpoints`` on a fresh lake, with these ratings."""
    lake = f"ducklake:sqlite:{tmp_path / name / 'catalog.sqlite'}"
    monkeypatch.setenv("EVAL_RATINGS_DIR", str(ratings.parent))
    defs = build_definitions(RUBRIC_DIR, lake, str(root))
    with dg.instance_for_test() as instance:
        outcomes = materialize_checkpoints(defs, instance, checkpoints, {RUBRIC}, log_level="ERROR")
        assert all(o.success for o in outcomes), [o.failures for o in outcomes]
    return _ours(lake)


def _ours(lake):
    return {t: df for t, df in contents(Warehouse(lake)).items() if t.startswith(f"{RUBRIC}.")}


@pytest.mark.slow
@pytest.mark.timeout(1200)  # three settlings of the daemon, and two CLI runs
def test_a_ui_backfill_a_fourth_checkpoint_and_new_ratings_settle_to_the_cli_result(tmp_path, monkeypatch):
    """Dagster alone, as `make ui` runs it (webserver and daemon): the webserver's GraphQL `launchPartitionBackfill`
    of the whole kg_qa group (its pools included) over the three checkpoints, run by the daemon's backfill loop and
    settled by the automation sensor; then a fourth checkpoint lands (the checkpoint sensor), then a second person's
    ratings of ckpt-0100 (the ratings sensor). After each settling, every table equals `eval-pipeline run`'s, and the
    re-decided checkpoints were never judged again."""
    from eval_pipeline.devtools.net import free_port, launch_partition_backfill, wait_until_serving

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    root = tmp_path / "checkpoints"
    for ckpt in FIRST_THREE:
        _land(root, ckpt, ckpt)
    ratings = tmp_path / "ratings" / RUBRIC
    shutil.copytree(ROOT / "data" / "human_ratings" / RUBRIC, ratings)
    lake = f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"
    env = dict(
        os.environ,
        DAGSTER_HOME=str(home),
        EVAL_WAREHOUSE=lake,
        EVAL_CHECKPOINT_DIR=str(root),
        EVAL_RATINGS_DIR=str(ratings.parent),
        EVAL_JUDGE="heuristic",
        EVAL_REPORT_DIR=str(tmp_path / "reports"),
        EVAL_WORKLIST_DIR=str(tmp_path / "worklists"),
        EVAL_SENSOR_INTERVAL_SECONDS="2",  # the daemon's sensors every 2 s: settling is read, not waited out
    )
    bin_ = os.path.dirname(sys.executable)
    ws = str(ROOT / "workspace.yaml")

    def sensor(verb):
        cmd = [os.path.join(bin_, "dagster"), "sensor", verb, "checkpoint_sensor", "-w", ws]
        subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=300, check=True)

    sensor("stop")  # the backfill alone launches the first three's runs
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    port = free_port()
    logs = [open(tmp_path / "webserver.log", "w"), open(tmp_path / "daemon.log", "w")]
    web = subprocess.Popen(
        [os.path.join(bin_, "dagster-webserver"), "-w", ws, "-p", str(port)],
        env=env,
        cwd=ROOT,
        stdout=logs[0],
        stderr=subprocess.STDOUT,
    )
    daemon = subprocess.Popen(
        [sys.executable, "-m", "eval_pipeline.runtime.daemon", "run", "-w", ws],
        env=env,
        cwd=ROOT,
        stdout=logs[1],
        stderr=subprocess.STDOUT,
    )
    judged = dg.AssetKey([RUBRIC, "judge_scores"])
    snapshots = {}
    try:
        with dg.DagsterInstance.get() as instance:
            instance.add_dynamic_partitions("checkpoints", FIRST_THREE)
            wait_until_serving(f"http://127.0.0.1:{port}/server_info", web, timeout_s=120)
            graph = build_definitions(RUBRIC_DIR, lake, str(root)).resolve_asset_graph()
            keys = [k for k in graph.get_all_asset_keys() if graph.get(k).group_name == RUBRIC]  # the group
            backfill = launch_partition_backfill(port, FIRST_THREE, [list(k.path) for k in keys])

            def done():
                bf = instance.get_backfill(backfill)
                return bf is not None and bf.status.value not in ("REQUESTED", "CANCELING")

            assert poll(done, 900, every=3), (tmp_path / "daemon.log").read_text()[-3000:]
            assert instance.get_backfill(backfill).status.value == "COMPLETED_SUCCESS"
            # #70: the three checkpoints in one run (the backfill policy); the decisions across them after, at most
            # one run a level of their chain (Dagster's backfill launches an unpartitioned asset once its parents are
            # done, its children with it when they are ready in the same tick): pool and lineage, agreement,
            # comparison and ranks, gates, verdict — however many checkpoints
            of_backfill = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill}))
            ranges = [r for r in of_backfill if r.tags.get("dagster/asset_partition_range_end")]
            levels = _levels(graph, [k for k in keys if graph.get(k).partitions_def is None])
            ran = [sorted(k.path[-1] for k in r.asset_selection or ()) for r in of_backfill]
            assert len(ranges) == 1 and len(of_backfill) <= 1 + levels, (levels, ran)
            assert poll(_settled(instance), 600, every=1)
            snapshots["backfill"] = _ours(lake)
            sensor("start")
            fourth = {"model": "lumen-7b-chat", "created_at": "2026-10-02T08:00:00Z", "parent": "ckpt-0300"}
            _land(root, "ckpt-0400", "ckpt-0300", fourth)
            four = lambda: len(instance.fetch_materializations(judged, limit=10).records) == 4  # noqa: E731
            assert poll(four, 600, every=3), (tmp_path / "daemon.log").read_text()[-3000:]
            assert poll(_settled(instance), 600, every=1)
            _more_ratings(ratings)
            read = dg.AssetKey([RUBRIC, "human_ratings"])
            before = len(instance.fetch_materializations(read, limit=100).records)
            assert poll(lambda: len(instance.fetch_materializations(read, limit=100).records) > before, 300, every=3)
            assert poll(_settled(instance), 600, every=1)
            failed = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
            assert not failed, [r.run_id for r in failed]
            # every checkpoint judged once: the re-decided ones cost no judge call
            partitions = [r.partition_key for r in instance.fetch_materializations(judged, limit=100).records]
            assert sorted(partitions) == [*FIRST_THREE, "ckpt-0400"]
            automated = [r for r in instance.get_runs() if r.tags.get("dagster/sensor_name") == "redecide_sensor"]
            assert automated, "nothing was decided again by the automation sensor"
    finally:
        for p in (daemon, web):
            stop(p)
        for f in logs:
            f.close()
    original = tmp_path / "original" / RUBRIC  # the ratings as the backfill read them
    shutil.copytree(ratings, original)
    (original / "ckpt-0100~Evaluator9.csv").unlink()
    # `eval-pipeline run` of the three with those ratings: the suite's reference lake (tests/helpers/reference.py)
    three = {t: df for t, df in reference_tables().items() if t.startswith(f"{RUBRIC}.")}
    assert differences(snapshots["backfill"], three) == []
    mine = _ours(lake)
    assert differences(mine, _cli(tmp_path, "cli4", root, ratings, [*FIRST_THREE, "ckpt-0400"], monkeypatch)) == []
    trust = mine[f"{RUBRIC}.judge_trust"]
    assert sorted(trust.checkpoint_id.unique()) == [*FIRST_THREE, "ckpt-0400"]
    assert set(trust.n_checkpoints) == {"3"}  # every verdict pools the three rated checkpoints (0400 has none)
    assert "Evaluator9" in set(mine[f"{RUBRIC}.human_ratings"].evaluator)  # the new ratings were read
