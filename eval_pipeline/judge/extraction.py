"""LLM extraction for metrics (ALMP's scene attributes): an extraction prompt, then an inference prompt.

Both calls go through the judge cache. The result per sample is a list of short
strings, or None with the reason; offline (heuristic judge) nothing is called and
the metric uses its own extractor.
"""

from __future__ import annotations

import json
import time
from functools import partial

import pandas as pd

from eval_pipeline.core.config import JudgeSpec, RubricConfig
from eval_pipeline.core.contracts import EXTRACTION_COLUMNS
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import JSONObject, Record, Row
from eval_pipeline.judge import cache, costs
from eval_pipeline.judge.backends import backend_for
from eval_pipeline.judge.cached import JudgeRunStats, cached_calls
from eval_pipeline.judge.client import CallSpec
from eval_pipeline.judge.parsing import JudgeParseError, first_object
from eval_pipeline.judge.prompts import INJECTION_NOTICE, data_block
from eval_pipeline.storage.warehouse import Warehouse

OBSERVATIONS_MAX = 30  # observations asked of the first prompt
ITEM_MAX_CHARS = 120  # one observation or attribute: a short phrase


def _list_schema(name: str, key: str, max_items: int) -> JSONObject:
    """The answer's schema, bounded: at most ``max_items`` strings of at most ``ITEM_MAX_CHARS`` (a server that
    constrains its output to the schema, as llama.cpp's grammar does, cannot run on past them)."""
    item = {"type": "string", "maxLength": ITEM_MAX_CHARS}
    return {
        "name": name,
        "strict": True,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": [key],
            "properties": {key: {"type": "array", "items": item, "maxItems": max_items}},
        },
    }


def parse_list(text: str | None, key: str, max_items: int) -> list[str]:
    if text is None:
        raise JudgeParseError("no answer content")
    obj = first_object(text)
    items = obj.get(key)
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise JudgeParseError(f"answer has no '{key}' list of strings")
    clean = [x.strip().lower() for x in items if x.strip()][:max_items]
    return list(dict.fromkeys(clean))


def _messages(instructions: str, key: str, payload: JSONObject) -> list[dict[str, str]]:
    system = "\n".join(
        [
            instructions.strip(),
            "",
            INJECTION_NOTICE,
            f'Answer with one JSON object and nothing else: {{"{key}": ["<string>", ...]}}',
        ]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": data_block(payload)}]


# long by design: two dependent prompt rounds (extract, then infer) and the rows they make; split, each half would need
# the other's state
def _offline_rows(name: str, ckpt: str, records: list[Record]) -> list[Row]:
    """Without an LLM judge: a row a sample saying the metric's own extractor is used."""
    reason = "no LLM configured; the metric's own extractor is used"
    return [
        dict(checkpoint_id=ckpt, sample_id=r["sample_id"], name=name, extractor="offline", model=None,
             observations=None, items=None, status="offline", reason=reason)
        for r in records
    ]  # fmt: skip


def extract(
    rubric: RubricConfig,
    ckpt: str,
    records: list[Record],
    wh: Warehouse,
    config: JudgeConfig,
) -> tuple[pd.DataFrame, JudgeRunStats]:
    ex = rubric.extraction
    assert ex is not None
    stats = JudgeRunStats()
    if not backend_for(config).calls_out:
        costs.record(stats)
        return pd.DataFrame(_offline_rows(ex.name, ckpt, records), columns=EXTRACTION_COLUMNS), stats
    t0 = time.perf_counter()
    spec = (rubric.panel.judges or [JudgeSpec(name="default")])[0]
    settings = config.for_judge(spec)
    stats.judges, stats.judge_kind = [settings.name], "llm"
    first = []
    for r in records:
        msgs = _messages(ex.extract_prompt, "observations", {ex.text_field: r.get(ex.text_field)})
        schema = _list_schema(f"{rubric.name}_{ex.name}_observations", "observations", OBSERVATIONS_MAX)
        first.append(
            CallSpec(
                cache.cache_key(settings, rubric.judge_version, msgs, schema),
                msgs,
                schema,
                partial(parse_list, key="observations", max_items=OBSERVATIONS_MAX),
            )
        )
    obs = cached_calls(rubric, settings, first, wh, stats)
    second: dict[str, CallSpec] = {}
    for r, spec1 in zip(records, first):
        o = obs[spec1.key]
        if o.parsed is None:
            continue
        msgs = _messages(ex.infer_prompt, "attributes", {"observations": o.parsed})
        schema = _list_schema(f"{rubric.name}_{ex.name}_attributes", "attributes", ex.max_items)
        second[r["sample_id"]] = CallSpec(
            cache.cache_key(settings, rubric.judge_version, msgs, schema),
            msgs,
            schema,
            partial(parse_list, key="attributes", max_items=ex.max_items),
        )
    inferred = cached_calls(rubric, settings, list(second.values()), wh, stats)
    rows = []
    for r, spec1 in zip(records, first):
        o1 = obs[spec1.key]
        spec2 = second.get(r["sample_id"])
        o2 = inferred.get(spec2.key) if spec2 else None
        ok = o2 is not None and o2.parsed is not None
        reason = None if ok else (o1.error if o1.parsed is None else (o2.error if o2 else "no inference"))
        rows.append(
            dict(
                checkpoint_id=ckpt,
                sample_id=r["sample_id"],
                name=ex.name,
                extractor="llm",
                model=settings.model,
                observations=json.dumps(o1.parsed) if o1.parsed is not None else None,
                items=json.dumps(o2.parsed) if ok and o2 is not None else None,
                status="ok" if ok else "missing",
                reason=reason,
            )
        )
    stats.wall_s = time.perf_counter() - t0
    costs.record(stats)
    return pd.DataFrame(rows, columns=EXTRACTION_COLUMNS), stats
