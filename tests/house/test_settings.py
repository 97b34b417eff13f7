"""#76: one judge settings model. Adding a knob is one field of ``JudgeConfig`` and its row in docs/operating.md:
every field is set by an environment variable (then the Dagster resource has it too, made from the fields) or by a
panel entry (a ``JudgeSpec`` field), or is learnt from the server; every variable has its row in the docs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from eval_pipeline.core.config import JudgeSpec
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.defs.resources import JudgeResource

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operating.md"
LEARNT = {"server_slots"}  # the server says it; nobody sets it


def test_every_judge_setting_has_a_variable_with_a_doc_row_or_a_panel_field():
    first_cells = re.findall(r"^\| ([^|]+) \|", DOCS.read_text(), re.M)
    rows = {name for cell in first_cells for name in re.findall(r"`([A-Z_]+)`", cell)}
    for f in dataclasses.fields(JudgeConfig):
        env, panel = f.metadata.get("env"), f.metadata.get("panel")
        assert env or panel or f.name in LEARNT, f"JudgeConfig.{f.name} has no variable and no panel field"
        if env:
            assert env in rows, f"{env} (JudgeConfig.{f.name}) has no row in docs/operating.md's settings table"
            assert f.name in JudgeResource.model_fields, f"{f.name} is not settable in the judge resource"
        if panel:
            assert panel in JudgeSpec.model_fields, f"JudgeConfig.{f.name}: {panel!r} is not a panel entry's field"


def test_a_panel_entry_overrides_the_run_where_it_says_and_keeps_it_where_not():
    run = JudgeConfig(mode="openai", model="run-model", base_url="http://a/v1", timeout_s=7.0)
    one = run.for_judge(JudgeSpec(name="j", temperature=0.4, seed=None, extra_body={"top_k": 2}))
    assert (one.model, one.base_url, one.timeout_s) == ("run-model", "http://a/v1", 7.0)  # the run's
    assert (one.name, one.temperature, one.seed, one.extra_body) == ("j", 0.4, None, (("top_k", 2),))  # the entry's
    other = run.for_judge(JudgeSpec(name="k", model="m2", base_url="http://b/v1", mode="batch"))
    assert (other.model, other.endpoint, other.call_mode) == ("m2", "http://b/v1", "batch")
