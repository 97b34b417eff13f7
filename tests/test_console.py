"""What a person or a CI job sees of `eval-pipeline run`: a quiet console, one summary per checkpoint, the
documented exit code for each way a run can go wrong (0 ok, 1 failed run, 2 usage, 3 gates, 4 incomplete,
130 interrupted), and the CLI's own defects fixed."""

import csv
import os
import re
import shutil
import signal
import time

import pytest

from eval_pipeline.cli import main as cli
from eval_pipeline.core import progress
from eval_pipeline.devtools.net import free_port
from eval_pipeline.storage.warehouse import Warehouse
from tests.conftest import SAMPLE_CHECKPOINTS, write_checkpoint
from tests.helpers.waiting import poll


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A private instance and warehouse, kg_qa of two sample checkpoints."""
    root = tmp_path / "ckpts"
    for ckpt in ("ckpt-0100", "ckpt-0200"):
        (root / ckpt).mkdir(parents=True)
        for name in ("kg_qa.jsonl", "checkpoint.json"):
            shutil.copy(SAMPLE_CHECKPOINTS / ckpt / name, root / ckpt / name)
    monkeypatch.setenv("EVAL_CHECKPOINT_DIR", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVAL_WAREHOUSE", f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}")
    monkeypatch.setenv("EVAL_JUDGE", "heuristic")
    return tmp_path


@pytest.mark.slow
def test_gates_failing_exit_3_quietly_and_the_flag_turns_it_to_0(env, capfd):
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa"]) == 3
    out, err = capfd.readouterr()
    assert "DEBUG" not in out + err and "STEP_START" not in out + err  # Dagster's log stays in the instance
    assert "[1/1] ckpt-0100 (lumen-7b-chat): FAILED GATES (rubrics: 1 failed gates) in" in out  # the verdict first
    assert "kg_qa                FAILED GATES     60/66 lines valid · judge 300/300" in out
    assert "failed metric_min: triple_coverage 0.207 (threshold 0.25)" in out
    assert all(len(line) <= 160 for line in out.splitlines())  # one screen wide, reasons never cut mid-word
    assert err.strip().splitlines()[-1].startswith("eval-pipeline: GATES FAILED:")
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0


@pytest.mark.slow
def test_an_unreachable_judge_is_incomplete_exit_4_and_a_red_completeness_check(env, monkeypatch, capfd):
    monkeypatch.setenv("EVAL_JUDGE", "openai")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unreachable-000")
    monkeypatch.setenv("EVAL_JUDGE_MAX_RETRIES", "0")
    monkeypatch.setenv("EVAL_JUDGE_TIMEOUT", "2")
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 4
    out, err = capfd.readouterr()
    assert "judge 0/300" in out and ": INCOMPLETE" in out and ": ok" not in out  # never "ok" for an incomplete run
    assert "INCOMPLETE 300 of 300 judge scores missing (100%; the rubric allows 5%)" in out
    flat = " ".join(out.split())  # a reason is whole, wrapped to the screen's width
    assert all(len(line) <= 160 for line in out.splitlines())
    assert "(is the endpoint right? OPENAI_BASE_URL" in flat  # #73: the reason's hint, whole
    assert "rated samples would settle it" not in flat and "judge has given no scores yet" in flat  # #73
    assert "judge_repeatability: judge_repeatability" not in out
    assert "eval-pipeline: INCOMPLETE" in err and "sk-unreachable" not in out + err
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        key = dg.AssetCheckKey(dg.AssetKey(["kg_qa", "judge_scores"]), "judge_completeness")
        latest = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)[0]
        evaluation = latest.event.dagster_event.event_specific_data
        assert evaluation.passed is False and evaluation.metadata["share_missing"].value == 1.0


@pytest.mark.slow
def test_a_dead_endpoint_stops_the_judging_within_seconds_with_one_line_naming_it(env, monkeypatch, capfd):
    """The default retries (4, with back-off) against a refused connection: the circuit breaker gives the endpoint
    up after a few attempts in a row, so the run ends in seconds, not after retrying every prompt: what each judge
    step sent is counted (a count, not a stopwatch: a loaded machine makes every run slower)."""
    port = free_port()
    monkeypatch.setenv("EVAL_JUDGE", "openai")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")  # nothing listens there
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dead-000")
    code = cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"])
    out, err = capfd.readouterr()
    assert code == 4, out + err
    assert f"endpoint 127.0.0.1:{port} unreachable, stopped asking" in out
    # a new judge: not a failure, and no rating is promised to settle a judge that gave no scores (#73)
    assert "judge pending on " in out and "the judge has given no scores yet" in out
    assert "sk-dead" not in out + err
    usage = Warehouse(os.environ["EVAL_WAREHOUSE"]).query_rows(
        "SELECT step, prompts, http_attempts FROM kg_qa.judge_usage WHERE checkpoint_id = 'ckpt-0100'"
    )
    assert usage and all(attempts < prompts for _step, prompts, attempts in usage), usage  # not even one each


@pytest.mark.slow
def test_a_quarter_of_the_lines_quarantined_is_incomplete(env, capfd):
    valid = [
        line for line in (SAMPLE_CHECKPOINTS / "ckpt-0100" / "kg_qa.jsonl").read_text().splitlines() if '"kg-0' in line
    ][:30]
    rows = valid + ["{bad json"] * 10
    write_checkpoint(env / "ckpts", "ckpt-bad", {"kg_qa": rows})
    code = cli(["run", "--checkpoint", "ckpt-bad", "--rubric", "kg_qa", "--no-fail-on-gates"])
    out, err = capfd.readouterr()
    assert code == 4, out + err
    assert re.search(r"INCOMPLETE 1\d of 40 lines quarantined \(\d\d%; the rubric allows 10%\)", out), out


@pytest.mark.slow
def test_ctrl_c_stops_the_whole_command_and_says_what_finished(env, capfd, monkeypatch):
    monkeypatch.setenv("EVAL_BACKFILL_CHUNK", "1")  # a run a checkpoint: the second one never starts

    def interrupt_on_judging(event):
        if event["kind"] == "step" and event["asset"] == "judge_scores" and event["phase"] == "start":
            os.kill(os.getpid(), signal.SIGINT)

    with progress.listening(interrupt_on_judging):
        code = cli(["run", "--rubric", "kg_qa"])
    out, err = capfd.readouterr()
    assert code == 130, out + err
    assert "[1/2] ckpt-0100 (lumen-7b-chat): INTERRUPTED" in out and "[2/2]" not in out
    assert "not started: ckpt-0200" in err


def test_sql_max_rows_is_honoured(env, capfd):
    wh = Warehouse()  # EVAL_WAREHOUSE, as the CLI reads it
    wh.execute("CREATE TABLE t AS SELECT range AS x FROM range(10)")
    assert cli(["sql", "SELECT * FROM t ORDER BY x", "--max-rows", "3"]) == 0
    out = capfd.readouterr().out.splitlines()
    assert [line.strip() for line in out[:4]] == ["x", "0", "1", "2"] and "7 more row(s) not shown" in out[-1]


def test_a_reversed_backfill_range_is_refused(env, capfd):
    assert cli(["backfill", "--from", "ckpt-0200", "--to", "ckpt-0100"]) == 2
    assert "--from ckpt-0200 comes after --to ckpt-0100" in capfd.readouterr().err
    assert cli(["backfill", "--from", "ckpt-9999"]) == 2
    assert "unknown checkpoint 'ckpt-9999'" in capfd.readouterr().err


def test_debug_works_after_the_subcommand_and_a_rubric_error_shows_every_problem(env, tmp_path, monkeypatch, capfd):
    rdir = tmp_path / "rubrics"
    rdir.mkdir()
    text = (SAMPLE_CHECKPOINTS.parent.parent / "rubric_configs" / "kg_qa.yaml").read_text()
    (rdir / "kg_qa.yaml").write_text(
        text.replace("headline: ", "headline: nope_").replace("kind: metric_min", "kind: metric_mni")
    )
    monkeypatch.setenv("EVAL_RUBRIC_DIR", str(rdir))
    assert cli(["run", "--checkpoint", "ckpt-0100"]) == 2
    err = capfd.readouterr().err
    assert "kg_qa.yaml: invalid rubric config" in err and "field 'headline'" in err and "metric_mni" in err
    with pytest.raises(Exception, match="invalid rubric config"):
        cli(["run", "--checkpoint", "ckpt-0100", "--debug"])


def test_the_ratings_template_loads_once_filled(env, rubrics, capfd):
    out = env / "ratings.csv"
    assert (
        cli(
            [
                "ratings-template",
                "--rubric",
                "kg_qa",
                "--checkpoint",
                "ckpt-0100",
                "--evaluator",
                "ann",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "wrote" in capfd.readouterr().out
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 60 and rows[0]["evaluator"] == "ann" and rows[0]["checkpoint"] == "ckpt-0100"
    assert set(rubrics["kg_qa"].rating_scales) <= set(rows[0])
    from eval_pipeline.ingest.ratings import load_ratings

    folder = env / "ratings" / "kg_qa"
    folder.mkdir(parents=True)
    for r in rows:
        r.update({k: "4" for k in rubrics["kg_qa"].rating_scales})
    with (folder / "filled.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    load = load_ratings(rubrics["kg_qa"], "ckpt-0100", {r["sample_id"] for r in rows}, root=env / "ratings")
    assert len(load.quarantine) == 0 and len(load.ratings) == 60 * len(rubrics["kg_qa"].rating_scales)


@pytest.mark.slow
def test_ratings_added_after_a_first_run_are_used_by_the_next(env, monkeypatch, capfd):
    """Class: a table's types come from the rubric and the data, whatever arrives first; a table an older version
    created all-VARCHAR from an empty frame is healed when real values arrive."""
    monkeypatch.setenv("EVAL_RATINGS_DIR", str(env / "no_ratings_yet"))
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0
    wh = Warehouse()  # EVAL_WAREHOUSE, as the CLI reads it
    types = dict(
        wh.query_rows(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'kg_qa' AND table_name = 'human_ratings'"
        )
    )
    assert types["score"] == "DOUBLE" and types["line_number"] == "BIGINT"
    # what an older version left: every column VARCHAR
    wh.execute("DROP TABLE kg_qa.human_ratings")
    wh.execute(
        "CREATE TABLE kg_qa.human_ratings (checkpoint_id VARCHAR, sample_id VARCHAR, evaluator VARCHAR, "
        "dimension VARCHAR, score VARCHAR, source_file VARCHAR, line_number VARCHAR)"
    )
    monkeypatch.setenv("EVAL_RATINGS_DIR", str(SAMPLE_CHECKPOINTS.parent / "human_ratings"))
    capfd.readouterr()
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0, capfd.readouterr()
    assert wh.query_rows("SELECT count(DISTINCT evaluator) FROM kg_qa.human_ratings")[0][0] == 2
    assert (
        wh.query_rows(
            "SELECT data_type FROM information_schema.columns WHERE table_schema = 'kg_qa' "
            "AND table_name = 'human_ratings' AND column_name = 'score'"
        )[0][0]
        == "DOUBLE"
    )
    n = wh.query_rows(
        "SELECT count(*) FROM kg_qa.agreement WHERE checkpoint_id = 'ckpt-0100' AND raters = 'judge~human_mean'"
    )[0][0]
    assert n > 0


@pytest.mark.slow
def test_a_report_that_cannot_be_written_never_fails_the_evaluation(env, monkeypatch, capfd):
    """Class (#19.12): drawing or writing the report is never a reason for an evaluation to fail."""
    blocker = env / "not_a_dir"
    blocker.write_text("a file where the report folder should be")
    monkeypatch.setenv("EVAL_REPORT_DIR", str(blocker / "reports"))
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa", "--no-fail-on-gates"]) == 0
    out, err = capfd.readouterr()
    assert "report not written" in out + err


def test_the_ratings_template_goes_where_ratings_are_read_and_unfilled_rows_are_not_faults(
    env, rubrics, monkeypatch, capfd
):
    """#34.5: it was written into the current folder without saying where it must go. By default it is written
    into the rubric's ratings folder, the path printed; rows not filled in yet are reported as such (quarantined
    with that reason), never as rejected ratings; an existing file is never overwritten."""
    from eval_pipeline.console import report_lines
    from eval_pipeline.ingest.ratings import folder_fingerprint, load_ratings
    from eval_pipeline.scoring.verdict import Verdict

    monkeypatch.setenv("EVAL_RATINGS_DIR", str(env / "ratings"))
    before = folder_fingerprint("kg_qa", env / "ratings")
    args = ["ratings-template", "--rubric", "kg_qa", "--checkpoint", "ckpt-0100", "--evaluator", "ann"]
    assert cli(args) == 0
    expected = env / "ratings" / "kg_qa" / "ckpt-0100~ann.csv"
    # a blank template is no rating: the folder's version (what the ratings sensor follows) has not moved (#60)
    assert folder_fingerprint("kg_qa", env / "ratings") == before
    out = capfd.readouterr().out
    assert expected.exists() and f"wrote {expected}" in out and "move the file" not in out
    assert cli(args) == 2 and "never overwritten" in capfd.readouterr().err
    ids = {r["sample_id"] for r in csv.DictReader(expected.open())}
    load = load_ratings(rubrics["kg_qa"], "ckpt-0100", ids, root=env / "ratings")
    assert load.ratings.empty and len(load.quarantine) == 60
    assert load.quarantine.reason.str.startswith("not rated yet: ").all()
    rows = list(csv.DictReader(expected.open()))
    rows[0]["relevance"] = "4"  # one score typed in: now it is a rating, and the version moves
    with expected.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert folder_fingerprint("kg_qa", env / "ratings") != before
    assert cli(["ratings-template", "--rubric", "kg_qa", "--checkpoint", "ckpt-0100", "--evaluator", "a b"]) == 2
    assert "unsafe evaluator name" in capfd.readouterr().err
    line = report_lines(Verdict("kg_qa", "ckpt-0100", lines=60, valid=60, rating_unrated=60))[0]
    assert "60 rows not rated yet" in line and "INCOMPLETE" not in line


def test_a_ctrl_c_is_forgotten_once_its_command_has_ended(env, rubrics, monkeypatch):
    """A stop belongs to the command it interrupted: judge calls made afterwards in the same process (the next
    command, a notebook, the next test) are not cancelled by it."""
    from eval_pipeline.core import interrupts
    from eval_pipeline.runtime.runs import interruptible

    with interruptible() as state:
        try:
            os.kill(os.getpid(), signal.SIGINT)  # our handler raises at once
            time.sleep(1)
        except KeyboardInterrupt:
            pass
        poll(interrupts.requested, 2, every=0.01)  # the watcher reads the pipe soon after
        assert state.check() and interrupts.requested()
    assert not interrupts.requested()


def test_a_second_run_of_a_checkpoint_another_process_is_evaluating_waits_for_it_and_never_says_0(
    env, capfd, monkeypatch
):
    """#48: the checkpoint is being evaluated elsewhere (the UI, the sensor, another machine): the command does not
    run it twice, and never says that no rubric has a file (it said so, and exited 4). #59.5: it waits for that run
    and reports its verdict; one it cannot learn in time (EVAL_WAIT_FOR_RUN) is exit 6, never 0 (it exited 0)."""
    import dagster as dg

    from eval_pipeline.core import settings
    from eval_pipeline.runtime.instance import open_instance

    monkeypatch.setenv("EVAL_WAIT_FOR_RUN", "0.5")
    instance = open_instance(settings.dagster_home(), settings.warehouse_path())
    elsewhere = dg.DagsterRun(
        job_name="__ASSET_JOB",
        run_id="0123abcd-0000-0000-0000-000000000000",
        status=dg.DagsterRunStatus.STARTED,
        tags={"eval/checkpoint": "ckpt-0100", "eval/host": "another-machine", "eval/pid": "1"},
    )
    instance.add_run(elsewhere)
    assert cli(["run", "--checkpoint", "ckpt-0100", "--rubric", "kg_qa"]) == 6
    out, err = capfd.readouterr()
    assert "ckpt-0100 (lumen-7b-chat): run 0123abcd-0000-0000-0000-000000000000 is evaluating it now" in out
    assert "NOT LEARNT: run 0123abcd-0000-0000-0000-000000000000 still evaluating it after 0.5 s" in out
    assert "no selected rubric has a file" not in out + err


def test_a_run_ended_without_a_failed_step_says_why():
    """A run the instance failed itself (run monitoring's start time-out: a run handed to busy workers waited past
    it) is one line with the instance's reason, not 'run … failure' alone."""
    import dagster as dg

    from eval_pipeline.runtime.runs import run_failure

    with dg.DagsterInstance.ephemeral() as instance:
        run = instance.add_run(dg.DagsterRun(job_name="__ASSET_JOB", run_id="feedbeef-0000-0000-0000-000000000000"))
        instance.report_run_failed(run, "Run timed out due to taking longer than 300 seconds to start.")
        failed = instance.get_run_by_id(run.run_id)
        assert failed is not None
        assert run_failure(instance, failed) == (
            "run feedbeef failure: Run timed out due to taking longer than 300 seconds to start."
        )


def test_a_long_step_failure_keeps_its_advice():
    """A step failure longer than the line (a long object path, a long step name) was cut at its end, and with it
    the advice ("run again when the store answers": the distributed store-stop test failed on it when a longer
    step name failed first); the cut is now in the middle."""
    from eval_pipeline.console import shorten

    failure = (
        "npc_dialogue__raw_outputs: the object store http://127.0.0.1:48509 did not answer within 2 s, 1 retry (PUT "
        + "evals/lake/npc_dialogue/raw_outputs/"
        + "x" * 120
        + ".parquet): the step stopped and committed nothing "
        "(the lake keeps its last snapshot); run again when the store answers"
    )
    line = shorten(failure, 300, keep_end=True)
    assert len(line) <= 300 and line.endswith("run again when the store answers") and " … " in line
    assert line.startswith("npc_dialogue__raw_outputs: the object store")
    assert shorten("short", 300, keep_end=True) == "short"
