"""One typed judge configuration: read from the environment once, settable in the resource, passed as it is."""

from __future__ import annotations

import dataclasses
import json

import pytest

from eval_pipeline.core.config import JudgeSpec
from eval_pipeline.core.judge_config import JudgeConfig, judge_config
from eval_pipeline.defs.resources import JudgeResource
from eval_pipeline.judge.workers import batch_line, settings_of

ENVIRONMENT = {  # every judge setting a person can set through the environment, with a value unlike the default
    "EVAL_JUDGE": ("mode", "openai"),
    "EVAL_JUDGE_MODEL": ("model", "judge-7b"),
    "OPENAI_BASE_URL": ("base_url", "http://127.0.0.1:9/v1"),
    "EVAL_JUDGE_CONCURRENCY": ("concurrency", 3),
    "EVAL_JUDGE_TIMEOUT": ("timeout_s", 2.5),
    "EVAL_JUDGE_MAX_RETRIES": ("max_retries", 1),
    "EVAL_JUDGE_PROCESSES": ("processes", 2),
    "EVAL_JUDGE_MAX_CONSECUTIVE_FAILURES": ("max_consecutive_failures", 5),
    "EVAL_JUDGE_MAX_SILENCE": ("max_silence_s", 30.0),
    "EVAL_JUDGE_BUDGET": ("budget", 2.5),
    "EVAL_PRICES": ("prices", "/prices/judge.yaml"),
    "EVAL_JUDGE_MODE": ("call_mode", "batch"),
    "EVAL_JUDGE_BATCH_WINDOW": ("batch_window", "48h"),
    "EVAL_JUDGE_BATCH_POLL": ("batch_poll_s", 5.0),
    "EVAL_JUDGE_BATCH_RETRY": ("batch_retry", "online"),
    "EVAL_JUDGE_BACKOFF_BASE": ("backoff_base_s", 0.25),
    "EVAL_JUDGE_BACKOFF_MAX": ("backoff_max_s", 5.0),
}
# a third value of a setting that takes one of a few words (the resource's own over the environment's)
OTHER = {"call_mode": "online", "batch_retry": "batch"}


@pytest.fixture
def clean_env(monkeypatch):
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_every_environment_setting_is_read_into_the_config_and_settable_in_the_resource(clean_env):
    assert judge_config() == JudgeConfig()  # nothing set: the defaults
    for name, (_field, value) in ENVIRONMENT.items():
        clean_env.setenv(name, str(value))
    read = judge_config()
    assert {f: getattr(read, f) for f, _ in ENVIRONMENT.values()} == dict(ENVIRONMENT.values())
    for field, value in ENVIRONMENT.values():  # the resource's field wins over the environment
        other = OTHER.get(field) or (value * 2 if isinstance(value, (int, float)) else f"{value}-other")
        assert getattr(JudgeResource(**{field: other}).config(), field) == other
    assert JudgeResource().config() == read  # unset fields: the environment's values
    # and nothing is left out: every field of the configuration a person sets is a resource field with a variable
    settable = {f.name for f in dataclasses.fields(JudgeConfig) if f.metadata.get("env")}
    assert settable == set(JudgeResource.model_fields) == {f for f, _ in ENVIRONMENT.values()}


def test_a_wrong_value_names_the_setting(clean_env):
    clean_env.setenv("EVAL_JUDGE_CONCURRENCY", "many")
    with pytest.raises(ValueError, match="EVAL_JUDGE_CONCURRENCY 'many' is not a whole number"):
        judge_config()
    clean_env.setenv("EVAL_JUDGE_CONCURRENCY", "0")
    with pytest.raises(ValueError, match="concurrency must be a number >= 1, got 0"):
        judge_config()
    clean_env.delenv("EVAL_JUDGE_CONCURRENCY")
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        JudgeResource(timeout_s=0).config()
    clean_env.setenv("EVAL_JUDGE_BUDGET", "lots")
    with pytest.raises(ValueError, match="EVAL_JUDGE_BUDGET 'lots' is not a number"):
        judge_config()
    clean_env.delenv("EVAL_JUDGE_BUDGET")
    with pytest.raises(ValueError, match="budget must be a finite number >= 0, got -1"):
        JudgeResource(budget=-1).config()


def test_the_resource_makes_its_config_once(clean_env):
    judge = JudgeResource()
    first = judge.config()
    clean_env.setenv("EVAL_JUDGE_MODEL", "changed-after")
    assert judge.config() is first  # read once: the run keeps the settings it started with


def test_a_judges_settings_come_from_its_panel_entry_over_the_config():
    config = JudgeConfig(mode="openai", model="base", base_url="http://a/v1", timeout_s=3, backoff_base_s=0.01)
    plain = config.for_judge()
    assert (plain.name, plain.model, plain.base_url, plain.timeout_s, plain.backoff_base_s) == (
        "default", "base", "http://a/v1", 3, 0.01,
    )  # fmt: skip
    own = config.for_judge(JudgeSpec(name="b", model="other", base_url="http://b/v1", extra_body={"top_k": 4}))
    assert (own.model, own.endpoint, own.extra_body) == ("other", "http://b/v1", (("top_k", 4),))


def test_settings_cross_to_a_worker_process_unchanged_and_without_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-the-protocol-1234")
    s = JudgeConfig(mode="openai").for_judge(JudgeSpec(name="j", extra_body={"min_p": 0.1}))
    sent = batch_line(s, [])
    assert settings_of(json.loads(sent)["settings"]) == s
    fields = set(json.loads(sent)["settings"])
    assert "sk-never" not in sent and fields == {f.name for f in dataclasses.fields(JudgeConfig)}
