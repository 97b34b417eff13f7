"""#36, items 3-7: what an endpoint sends back can neither crash a step nor leak the key.

Classes: the configured key (in any common encoding) echoed in a rationale, an error body or a non-JSON 200 is
never stored; absurd numbers in usage or logprobs count as nothing; an answer nested thousands of levels deep is
a missing score with its reason."""

import base64
import math

import pytest

from eval_pipeline.judge.costs import token_count
from eval_pipeline.judge.logprobs import score_distributions
from eval_pipeline.judge.parsing import JudgeParseError, parse_answer
from eval_pipeline.judge.redact import redact
from tests.helpers.judges import openai_judge

KEY = "0123456789abcdef0123456789abcdef"  # an Azure-style key: 32 hex digits, no sk- prefix


@pytest.mark.parametrize(
    "echo",
    [KEY, base64.b64encode(KEY.encode()).decode(), KEY.encode().hex(), base64.urlsafe_b64encode(KEY.encode()).decode()],
)
def test_the_configured_key_is_redacted_in_every_common_encoding(echo):
    text = f'{{"scores": {{"a": 3}}, "rationale": "your key is {echo} ok"}}'
    out = redact(text, KEY)
    assert echo not in out and KEY not in out and "***" in out
    assert parse_answer(out, "scores", {"a": (1, 5)}).scores == {"a": 3}  # the answer still reads


def test_absurd_token_counts_count_as_nothing():
    for value in (1e400, 10**30, float("nan"), -5, "many", None):
        assert token_count(value) == 0
    assert token_count(1234) == 1234


def test_a_log_probability_above_zero_is_no_distribution_and_no_crash():
    text = '{"scores": {"a": 3}}'
    tokens = ['{"', "scores", '":', ' {"', "a", '":', " ", "3", "}}"]
    good = [(t, [(t, -0.1)]) for t in tokens]
    good[7] = ("3", [("3", math.log(0.7)), ("4", math.log(0.3))])
    assert score_distributions(text, good, {"a": (1, 5)})["a"] == pytest.approx({3: 0.7, 4: 0.3})
    bad = list(good)
    bad[7] = ("3", [("3", 1000.0), ("4", -0.5)])
    assert score_distributions(text, bad, {"a": (1, 5)}) == {}


def test_an_answer_nested_thousands_of_levels_deep_is_a_parse_error():
    deep = '{"a": ' * 5000 + "1" + "}" * 5000
    with pytest.raises(JudgeParseError, match="nested too deeply"):
        parse_answer(deep, "scores", {"a": (1, 5)})


def test_an_answer_cut_off_at_max_tokens_is_a_missing_score_with_its_reason_never_a_score(rubrics, tmp_path):
    """#37.4: the scores of a cut-off answer may be whole while its rationale is not; the endpoint says
    finish_reason length, and that answer is never turned into a score."""
    from eval_pipeline.core.contracts import PANEL
    from eval_pipeline.devtools.openai_stub import StubServer
    from eval_pipeline.judge.runner import judge_samples
    from eval_pipeline.storage.warehouse import Warehouse
    from tests.judge.test_judge import FAST, emp_records

    with StubServer() as stub, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_BASE_URL", stub.base_url)
        mp.setenv("OPENAI_API_KEY", "sk-test")
        stub.state.faults.extend(["cut_off"] * 4)  # the first answers, and their re-asks
        df, _ = judge_samples(
            rubrics["empathetic_dialogue"], "c", emp_records(3), Warehouse(str(tmp_path / "w.duckdb")),
            config=openai_judge(FAST),
        )  # fmt: skip
    panel = df[(df.judge == PANEL) & (df.kind == "dimension")]
    cut = panel[panel.reason.fillna("").str.contains("cut off at max_tokens")]
    assert len(cut) > 0 and cut.score.isna().all() and (cut.status == "missing").all()
    assert panel[panel.score.notna()].reason.isna().all()  # the others are scores, without a note


def test_an_answer_of_megabytes_is_a_missing_score_and_is_not_cached(rubrics, tmp_path):
    """#36: 2 MB answers were cached whole (230 MB for 110 calls). The answer is a missing score with its reason;
    the cache and judge_scores hold none of it."""
    from eval_pipeline.core.contracts import PANEL
    from eval_pipeline.devtools.openai_stub import StubServer
    from eval_pipeline.judge.runner import judge_samples
    from eval_pipeline.storage.warehouse import Warehouse
    from tests.judge.test_judge import FAST, emp_records

    wh = Warehouse(str(tmp_path / "w.duckdb"))
    with StubServer() as stub, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_BASE_URL", stub.base_url)
        mp.setenv("OPENAI_API_KEY", "sk-test")
        stub.state.faults.extend(["huge"] * 6)
        df, _ = judge_samples(rubrics["empathetic_dialogue"], "c", emp_records(3), wh, config=openai_judge(FAST))
    panel = df[(df.judge == PANEL) & (df.kind == "dimension")]
    assert panel.score.isna().all() and panel.reason.str.contains("more than 65,536").all()
    size = (
        wh.query_rows("SELECT coalesce(max(length(answer_text)), 0) FROM main.judge_cache")[0][0]
        if wh.table_exists("main", "judge_cache")
        else 0
    )
    assert size < 65_536
    assert df.rationale.fillna("").str.len().max() < 65_536
