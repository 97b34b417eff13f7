"""One LLM judge's rows: a rubric's prompts for each record, keyed for the cache under the judge's settings
(judge.cache), asked through the cache (judge.cached), and each answer read into judge_scores rows (judge.rows):
the chosen score, or the expected score from token probabilities where the judge asks for them (judge.logprobs),
or a missing score with its reason."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from functools import partial

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import Record, Row
from eval_pipeline.judge import cache
from eval_pipeline.judge.cached import JudgeRunStats, cached_calls
from eval_pipeline.judge.client import CallSpec
from eval_pipeline.judge.logprobs import Reading, read_distributions
from eval_pipeline.judge.parsing import parse_answer
from eval_pipeline.judge.prompts import build_messages, response_schema
from eval_pipeline.judge.rows import questionnaire_rows, reading, score_row
from eval_pipeline.storage.warehouse import Warehouse


def repeat_seed(seed: int | None, judge: str, repeat: int) -> int | None:
    """The sampling seed of repeat scoring ``repeat`` by ``judge``: the configured seed for the first scoring, a
    seed derived from (seed, judge, repeat) for each repeat. The same seed would make a server that honours it
    answer a repeat exactly as the first time, and a pure-noise judge would look perfectly repeatable."""
    if seed is None or repeat == 0:
        return seed
    digest = hashlib.sha256(f"{seed}:{judge}:{repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def repeat_settings(settings: JudgeConfig, repeat: int) -> JudgeConfig:
    """``settings`` with the seed of repeat scoring ``repeat`` (see ``repeat_seed``)."""
    seed = repeat_seed(settings.seed, settings.name, repeat)
    return settings if seed == settings.seed else replace(settings, seed=seed)


def _score_specs(
    rubric: RubricConfig, settings: JudgeConfig, records: list[Record], repeat: int = 0
) -> list[tuple[Record, bool, dict[str, tuple[int, int]], CallSpec]]:
    kinds = ([False] if rubric.judged_dimensions else []) + ([True] if rubric.questionnaire else [])
    specs = []
    for rec in records:
        for qn in kinds:
            messages = build_messages(rubric, rec, questionnaire=qn)
            schema = response_schema(rubric, qn)
            if qn:
                q = rubric.questionnaire
                assert q is not None
                scales = {i.id: (q.scale.min, q.scale.max) for m in q.metrics for i in m.items}
            else:
                scales = {d.key: (rubric.scale_of(d).min, rubric.scale_of(d).max) for d in rubric.judged_dimensions}
            container = "answers" if qn else "scores"
            key = cache.cache_key(settings, rubric.judge_version, messages, schema, repeat)
            specs.append(
                (
                    rec,
                    qn,
                    scales,
                    CallSpec(key, messages, schema, partial(parse_answer, container=container, scales=scales)),
                )
            )
    return specs


def judge_rows(
    rubric: RubricConfig,
    ckpt: str,
    settings: JudgeConfig,
    records: list[Record],
    wh: Warehouse,
    stats: JudgeRunStats,
    repeat: int = 0,
) -> list[Row]:
    """judge_scores rows (judge.rows) of ``records`` by the one judge ``settings`` describes: its prompts keyed for
    the cache, asked through it (judge.cached), each answer read into scores, or missing with the reason."""
    settings = repeat_settings(settings, repeat)
    specs = _score_specs(rubric, settings, records, repeat)
    outcomes = cached_calls(rubric, settings, [s for *_, s in specs], wh, stats)
    rows: list[Row] = []
    counted: set[str] = set()
    for rec, qn, scales, spec in specs:
        o = outcomes[spec.key]
        first_use = spec.key not in counted  # tokens and latency are counted once per call
        counted.add(spec.key)
        kind = "questionnaire_item" if qn else "dimension"
        task_rows = []
        found = (
            read_distributions(o.answer_text, o.logprobs, scales, o.parsed.scores)
            if o.parsed is not None and settings.top_logprobs
            else {}
        )
        for i, dim in enumerate(scales):
            once = i == 0 and first_use  # a call's tokens, latency and attempts on its first row only
            chosen = None if o.parsed is None else o.parsed.scores[dim]
            got = found.get(dim)
            if got is None and o.parsed is not None and settings.top_logprobs:
                got = Reading(None, note="the endpoint returned no token probabilities")
            score, columns = reading(chosen, got.dist if got else None, rubric.panel.score_source, got)
            rationale = "" if o.parsed is None else o.parsed.rationale[:500]
            task_rows.append(
                score_row(
                    checkpoint_id=ckpt,
                    sample_id=rec["sample_id"],
                    judge=settings.name,
                    judge_kind="llm",
                    model=settings.model,
                    dimension=dim,
                    kind=kind,
                    score=score,
                    reason=o.error if score is None else None,
                    rationale=rationale,
                    cached=o.cached,
                    rubric_version=rubric.version,
                    prompt_tokens=o.prompt_tokens if once else 0,
                    completion_tokens=o.completion_tokens if once else 0,
                    latency_ms=o.latency_ms if once else None,
                    attempts=o.attempts if once else 0,
                )
            )
            task_rows[-1].update(columns)
        rows += task_rows
        if qn:
            rows += questionnaire_rows(rubric, task_rows)
    return rows
