"""Scoring a checkpoint's samples with a rubric's judge panel.

Produces the long table `<rubric>.judge_scores`: one row per sample, judge and
dimension (or questionnaire item / metric / total), with the score or, when the
answer could not be used, a missing score with its reason. The panel's
aggregate is written as judge = 'panel'; downstream assets read those rows.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from functools import partial
from typing import Any

import pandas as pd

from eval_pipeline.core import settings
from eval_pipeline.core.config import JudgeSpec, RubricConfig
from eval_pipeline.core.contracts import PANEL, SCORE_COLUMNS
from eval_pipeline.judge import cache, costs
from eval_pipeline.judge.cached import JudgeRunStats, cached_calls
from eval_pipeline.judge.calls import CallSpec
from eval_pipeline.judge.client import JudgeSettings
from eval_pipeline.judge.heuristic import HeuristicJudge
from eval_pipeline.judge.logprobs import Reading, expected, read_distributions
from eval_pipeline.judge.parsing import parse_answer
from eval_pipeline.judge.prompts import build_messages, response_schema
from eval_pipeline.judge.rows import _panel_rows, _questionnaire_rows, _row
from eval_pipeline.storage.warehouse import Warehouse


def settings_from_env(spec: JudgeSpec | None = None, **overrides: Any) -> JudgeSettings:
    spec = spec or JudgeSpec(name="default")
    env = settings.judge_env()
    values: dict[str, Any] = dict(
        name=spec.name,
        model=spec.model or env.model,
        base_url=spec.base_url,
        identity=spec.identity,
        temperature=spec.temperature,
        seed=spec.seed,
        max_tokens=spec.max_tokens,
        top_logprobs=spec.top_logprobs,
        extra_body=tuple(sorted(spec.extra_body.items())),
        timeout_s=env.timeout_s,
        max_retries=env.max_retries,
        concurrency=env.concurrency,
        processes=env.processes,
        max_consecutive_failures=env.max_consecutive_failures,
    )
    values.update({k: v for k, v in overrides.items() if v is not None})
    return JudgeSettings(**values)


def _heuristic_rows(
    rubric: RubricConfig, ckpt: str, records: list[dict[str, Any]], repeat: int = 0
) -> list[dict[str, Any]]:
    judge = HeuristicJudge(rubric)
    item_ids = {i.id for m in rubric.questionnaire.metrics for i in m.items} if rubric.questionnaire else set()
    rows = []
    for rec in records:
        sample_rows = []
        for key, (chosen, why, dist) in judge.score(rec, repeat).items():
            kind = "questionnaire_item" if key in item_ids else "dimension"
            score, reading = _reading(chosen, dist, rubric.panel.score_source)
            row = _row(
                ckpt,
                rec["sample_id"],
                judge.name,
                judge.kind,
                judge.model,
                key,
                kind,
                score,
                None if score is not None else why,
                why if score is not None else "",
                False,
                rubric.version,
            )
            row.update(reading)
            sample_rows.append(row)
        rows += sample_rows
        rows += _questionnaire_rows(rubric, [r for r in sample_rows if r["kind"] == "questionnaire_item"])
    return rows


def _reading(
    chosen: float | None, dist: dict[int, float] | None, source: str, found: Reading | None = None
) -> tuple[float | None, dict[str, Any]]:
    """The score that feeds the results (the expected score over ``dist`` when there is one and ``source`` says
    so, else the written one) and the row's written / expected / distribution columns, which say which fed it
    (``score_source``) and, when probabilities were read but not used, why (``found``, logprobs.Reading)."""
    exp = expected(dist) if dist else None
    use_expected = exp is not None and source == "expected"
    score = exp if use_expected else chosen
    columns = dict(
        chosen_score=None if chosen is None else float(chosen),
        expected_score=exp,
        score_distribution=json.dumps({str(k): round(p, 6) for k, p in dist.items()}) if dist else None,
        score_source=None if score is None else ("expected" if use_expected else "chosen"),
        prob_on_scale=None if found is None else found.share,
        distribution_note=None if found is None or found.dist is not None else found.note,
    )
    return score, columns


def repeat_seed(seed: int | None, judge: str, repeat: int) -> int | None:
    """The sampling seed of repeat scoring ``repeat`` by ``judge``: the configured seed for the first scoring, a
    seed derived from (seed, judge, repeat) for each repeat. The same seed would make a server that honours it
    answer a repeat exactly as the first time, and a pure-noise judge would look perfectly repeatable."""
    if seed is None or repeat == 0:
        return seed
    digest = hashlib.sha256(f"{seed}:{judge}:{repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def repeat_settings(settings: JudgeSettings, repeat: int) -> JudgeSettings:
    """``settings`` with the seed of repeat scoring ``repeat`` (see ``repeat_seed``)."""
    seed = repeat_seed(settings.seed, settings.name, repeat)
    return settings if seed == settings.seed else replace(settings, seed=seed)


def _score_specs(
    rubric: RubricConfig, settings: JudgeSettings, records: list[dict[str, Any]], repeat: int = 0
) -> list[tuple[dict, bool, dict, CallSpec]]:
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
            params = settings.cache_params()
            if repeat:  # a repeat scoring of the same prompt: its own cache key, so it is asked again
                params = {**params, "repeat": repeat}
            key = cache.cache_key(params, rubric.judge_version, messages, schema)
            specs.append(
                (
                    rec,
                    qn,
                    scales,
                    CallSpec(key, messages, schema, partial(parse_answer, container=container, scales=scales)),
                )
            )
    return specs


def _llm_rows(
    rubric: RubricConfig,
    ckpt: str,
    settings: JudgeSettings,
    records: list[dict[str, Any]],
    wh: Warehouse,
    stats: JudgeRunStats,
    repeat: int = 0,
) -> list[dict[str, Any]]:
    settings = repeat_settings(settings, repeat)
    specs = _score_specs(rubric, settings, records, repeat)
    outcomes = cached_calls(rubric, settings, [s for *_, s in specs], wh, stats)
    rows: list[dict[str, Any]] = []
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
            m = (
                (o.prompt_tokens, o.completion_tokens, o.latency_ms, o.attempts)
                if (i == 0 and first_use)
                else (0, 0, None, 0)
            )
            chosen = None if o.parsed is None else o.parsed.scores[dim]
            got = found.get(dim)
            if got is None and o.parsed is not None and settings.top_logprobs:
                got = Reading(None, note="the endpoint returned no token probabilities")
            score, reading = _reading(chosen, got.dist if got else None, rubric.panel.score_source, got)
            rationale = "" if o.parsed is None else o.parsed.rationale[:500]
            task_rows.append(
                _row(
                    ckpt,
                    rec["sample_id"],
                    settings.name,
                    "llm",
                    settings.model,
                    dim,
                    kind,
                    score,
                    o.error if score is None else None,
                    rationale,
                    o.cached,
                    rubric.version,
                    *m,
                )
            )
            task_rows[-1].update(reading)
        rows += task_rows
        if qn:
            rows += _questionnaire_rows(rubric, task_rows)
    return rows


def judge_samples(
    rubric: RubricConfig,
    ckpt: str,
    records: list[dict[str, Any]],
    wh: Warehouse,
    mode: str | None = None,
    overrides: dict[str, Any] | None = None,
    repeat: int = 0,
) -> tuple[pd.DataFrame, JudgeRunStats]:
    """Score records with the heuristic judge or the rubric's LLM panel; returns the long table and stats.
    ``repeat`` > 0: the same prompts scored again under their own cache keys (the judge's repeatability)."""
    mode = (mode or settings.judge_env().mode).lower()
    stats = JudgeRunStats()
    t0 = time.perf_counter()
    if mode == "heuristic":
        stats.judges = ["heuristic"]
        stats.judge_kind = "heuristic"
        rows = _heuristic_rows(rubric, ckpt, records, repeat)
        stats.prompts = len(records)
    elif mode == "openai":
        specs = rubric.panel.judges or [JudgeSpec(name="default")]
        stats.judges = [s.name for s in specs]
        stats.judge_kind = "llm"
        rows = []
        for spec in specs:
            rows += _llm_rows(rubric, ckpt, settings_from_env(spec, **(overrides or {})), records, wh, stats, repeat)
    else:
        raise ValueError(f"EVAL_JUDGE must be 'heuristic' or 'openai', got {mode!r}")
    rows += _panel_rows(rubric, rows, rubric.panel.aggregate)
    stats.wall_s = time.perf_counter() - t0
    df = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    df = df.astype(
        {
            "score": "float64",
            "prompt_tokens": "int64",
            "completion_tokens": "int64",
            "latency_ms": "float64",
            "attempts": "int64",
            "cached": "bool",
            "chosen_score": "float64",
            "expected_score": "float64",
            "prob_on_scale": "float64",
        }
    )
    missing = df[(df.judge == PANEL) & (df.status == "missing")]
    stats.missing = len(missing)
    for reason in missing.reason:
        key = str(reason).split(":")[0][:80]
        stats.missing_reasons[key] = stats.missing_reasons.get(key, 0) + 1
    costs.record(stats)
    return df, stats
