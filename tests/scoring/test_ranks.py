"""#74: rank sets across checkpoints — what a person reads ("1–2 of 3, tied with ckpt-0200") follows from pairwise
intervals that hold for every pair at once, never from overlapping intervals compared by eye; checkpoints judged by
different judges are never ranked together; the sample lake's console, viewer, report, SQL and export say the same
rank set."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from eval_pipeline.scoring import ranks


def _scores(means: dict[str, float], n: int = 200, seed: int = 1, prompt_sd: float = 0.15) -> pd.DataFrame:
    """Every checkpoint's scores of the same ``n`` prompts: a prompt effect they share plus their own noise."""
    rng = np.random.default_rng(seed)
    prompt = rng.normal(0, prompt_sd, n)
    rows = []
    for c, mu in means.items():
        for i, v in enumerate(mu + prompt + rng.normal(0, 0.15 if prompt_sd == 0.15 else 0.05, n)):
            rows.append(dict(checkpoint_id=c, sample_id=f"s{i}", value=v))
    return pd.DataFrame(rows)


def test_a_clear_best_ranks_alone_and_two_equal_checkpoints_are_tied():
    got = ranks.rank_sets(ranks.judged_moments(_scores({"a": 0.60, "b": 0.60, "c": 0.75}))).set_index("checkpoint_id")
    assert (got.loc["c", "rank_low"], got.loc["c", "rank_high"]) == (1, 1)
    assert got.loc["c", "rank_set"] == "1 of 3"
    assert (got.loc["a", "rank_low"], got.loc["a", "rank_high"]) == (2, 3)
    assert got.loc["a", "rank_set"] == "2–3 of 3, tied with b"


def test_lower_is_better_turns_the_ranking():
    got = ranks.rank_sets(ranks.judged_moments(_scores({"a": 0.60, "c": 0.75})), lower_is_better=True)
    assert got.set_index("checkpoint_id").rank_low.to_dict() == {"a": 1, "c": 2}


def test_pairing_over_shared_prompts_separates_what_unpaired_means_cannot():
    """The prompt effect (sd 0.4, the checkpoints' own noise 0.05) is shared by both checkpoints of the same prompts:
    paired, a difference of 0.03 over 200 prompts is clear (about 6 standard errors); the same scores taken as
    scores of different prompts are not (under 1)."""
    paired = ranks.rank_sets(ranks.judged_moments(_scores({"a": 0.60, "b": 0.63}, seed=3, prompt_sd=0.4)))
    apart = _scores({"a": 0.60, "b": 0.63}, seed=3, prompt_sd=0.4)
    apart["sample_id"] = apart.checkpoint_id + "-" + apart.sample_id
    unpaired = ranks.rank_sets(ranks.judged_moments(apart))
    assert paired.rank_set.tolist() == ["2 of 2", "1 of 2"]
    assert unpaired.rank_set.tolist() == ["1–2 of 2, tied with b", "1–2 of 2, tied with a"]


def test_the_sets_follow_from_pairwise_intervals_never_wider_than_bonferroni():
    """Computed here from the scores with scipy: a pair Bonferroni separates is separated; a pair whose plain 95 %
    interval holds 0 is tied; so each set lies between those two constructions."""
    means = {f"c{k}": 0.6 + 0.012 * k for k in range(7)}
    df = _scores(means, seed=5)
    got = ranks.rank_sets(ranks.judged_moments(df)).set_index("checkpoint_id")
    wide = df.pivot(index="sample_id", columns="checkpoint_id", values="value")
    ids = list(wide.columns)
    pairs = len(ids) * (len(ids) - 1) // 2
    for a in ids:
        for b in ids:
            if a >= b:
                continue
            t = sps.ttest_rel(wide[a], wide[b]).statistic
            tied = b in got.loc[a, "tied_with"].split(", ")
            if abs(t) > sps.t.ppf(1 - 0.05 / (2 * pairs), len(wide) - 1):
                assert not tied, (a, b, t)
            if abs(t) < sps.t.ppf(0.975, len(wide) - 1):
                assert tied, (a, b, t)


@pytest.mark.slow
def test_the_sample_lake_says_the_same_rank_set_everywhere(tmp_path):
    """The sample lake's stored rank sets are the leaderboard's, the console's, the report's, the viewer's first
    screen's and the export's; and a checkpoint is ranked only among those its judge judged."""
    from eval_pipeline.publish.overview import overview
    from eval_pipeline.publish.queries import leaderboard_text
    from eval_pipeline.publish.report import build_report
    from eval_pipeline.storage.warehouse import Warehouse
    from tests.helpers.reference import evaluated_project, reference_tables

    tables = reference_tables()
    own = {name: frame for name, frame in tables.items() if name.endswith(".ranks") and not name.startswith("main.")}
    stored = {
        (name.split(".")[0], ck): shown
        for name, frame in own.items()
        for ck, shown in zip(frame.checkpoint_id, frame.rank_set, strict=True)
    }
    assert len(stored) == 15, sorted(stored)  # three checkpoints, five rubrics
    union = tables["main.ranks"]
    assert dict(zip(zip(union.rubric, union.checkpoint_id, strict=True), union.rank_set, strict=True)) == stored
    for name, frame in own.items():
        identities = tables[name.replace(".ranks", ".judge_identity")].set_index("checkpoint_id").judge_identity
        for identity, group in frame.groupby("judge_identity"):
            assert set(identities[identities == identity].index) == set(group.checkpoint_id)
            assert (group.checkpoints_ranked.astype(int) == len(group)).all()
    wh = Warehouse(f"ducklake:sqlite:{evaluated_project()}/data/lake/catalog.sqlite", read_only=True)
    board = wh.query_df("SELECT rubric, checkpoint_id, rank_set FROM main.leaderboard")
    assert {(r, c): s for r, c, s in board.itertuples(index=False)} == stored
    console = leaderboard_text(wh)
    assert {(r, c): s for r, c, s in console[["rubric", "checkpoint", "rank"]].itertuples(index=False)} == stored
    assert overview(wh).ranks == {(c, r): s for (r, c), s in stored.items()}
    report = build_report(wh)
    assert "★" not in report
    for shown in set(stored.values()):
        assert f"rank {shown}" in report
    from eval_pipeline.publish.export import export_checkpoint

    export_checkpoint(wh, "ckpt-0200", None, tmp_path, "csv")
    for (rubric, ck), shown in stored.items():
        if ck == "ckpt-0200":
            exported = pd.read_csv(tmp_path / rubric / "ranks.csv")
            assert exported.rank_set.tolist() == [shown], rubric


@pytest.mark.slow
def test_the_ranks_and_compare_commands_on_the_sample_lake():
    """`eval-pipeline ranks` prints the stored headline sets (computed again, equal) and any score's on request;
    `eval-pipeline compare` tests two checkpoints that are not parent and child; a wrong score or checkpoint is one
    line and exit 2."""
    import subprocess

    from tests.helpers.reference import CLI, clean_env, evaluated_project, reference_tables

    project = evaluated_project()
    env = clean_env(project)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([CLI, *args], cwd=project, env=env, capture_output=True, text=True, timeout=300)

    stored = reference_tables()["kg_qa.ranks"]
    done = cli("ranks", "--rubric", "kg_qa")
    assert done.returncode == 0, done.stderr
    for shown in stored.rank_set:
        assert shown in done.stdout
    accuracy = cli("ranks", "--rubric", "kg_qa", "--score", "accuracy")
    assert accuracy.returncode == 0 and "calibrated" in accuracy.stdout, accuracy.stdout + accuracy.stderr
    pair = cli("compare", "ckpt-0100", "ckpt-0300", "--rubric", "kg_qa")
    assert pair.returncode == 0 and "ckpt-0300 against ckpt-0100" in pair.stdout and "p_holm" in pair.stdout
    # a reader that closes the pipe after the first line (| head -1): quiet, exit 0
    head = subprocess.run(
        f"'{CLI}' compare ckpt-0100 ckpt-0300 --rubric kg_qa | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert head.returncode == 0 and head.stderr == "", head.stderr
    for bad in (
        ("ranks", "--rubric", "kg_qa", "--score", "nope"),
        ("compare", "ckpt-0100", "ckpt-9999", "--rubric", "kg_qa"),
    ):
        wrong = cli(*bad)
        assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr
        assert "Traceback" not in wrong.stderr
