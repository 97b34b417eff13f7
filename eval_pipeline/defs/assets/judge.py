"""Judging: the panel's scores, LLM extractions for metrics, and the judge re-scoring the document's examples."""

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import dagster as dg
import numpy as np
import pandas as pd

from eval_pipeline.agreement.reliability import calibration_rows
from eval_pipeline.agreement.trust import judge_bar
from eval_pipeline.core import settings
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import BUDGET_TAG, PANEL, Table
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import Record
from eval_pipeline.defs.asset import Versioned, asset_key, rounded, rubric_asset
from eval_pipeline.defs.queries import spent_by_runs
from eval_pipeline.defs.resources import JudgeResource, WarehouseResource
from eval_pipeline.ingest.samples import load_samples, to_records
from eval_pipeline.judge import batch as judge_batch
from eval_pipeline.judge import costs
from eval_pipeline.judge.backends import JudgedAt
from eval_pipeline.judge.cached import JudgeRunStats
from eval_pipeline.judge.identity import IDENTITY_COLUMNS, JudgeIdentity
from eval_pipeline.judge.redact import redact
from eval_pipeline.judge.repeat import pick_subset, repeatability, repeated_scores
from eval_pipeline.storage.warehouse import Warehouse


def throttling_text(stats: JudgeRunStats) -> str:
    """How the client throttled itself in this step, in words (the metadata's figure of calls in flight is the
    peak; this says where it started and settled)."""
    if not stats.calls:
        return "no calls"
    start = f"started at {stats.start_concurrency} in flight" if stats.start_concurrency else "started as configured"
    waited = (
        f"; time-out doubled {stats.timeout_extensions} time(s) within the server's slots"
        if stats.timeout_extensions
        else ""
    )
    if not stats.timeout_cuts:
        return f"{start}; never throttled{waited}"
    settled = f", settled at {stats.final_concurrency}" if stats.final_concurrency else ""
    return f"{start}; halved {stats.timeout_cuts} time(s) on time-outs{settled}{waited}"


def _usage_frame(
    ckpt: str, step: str, run_id: str, batches: list[JudgeRunStats], prices: str | None
) -> tuple[pd.DataFrame, dict[str, dg.MetadataValue]]:
    """The step's row of ``<rubric>.judge_usage`` and its Dagster metadata, from every judging batch it made."""
    total = JudgeRunStats()
    for b in batches:
        total.merge(b)
    currency = costs.load_prices(prices).currency
    lat = total.latencies_ms
    row = dict(
        checkpoint_id=ckpt,
        step=step,
        run_id=run_id,
        judge=", ".join(total.judges) or total.judge_kind,
        models=", ".join(total.models) or total.judge_kind,
        prompts=total.prompts,
        calls=total.calls,
        cache_hits=total.cache_hits,
        http_attempts=total.http_attempts,
        prompt_tokens=total.prompt_tokens,
        completion_tokens=total.completion_tokens,
        latency_p50_ms=costs.percentile(lat, 50),
        latency_p90_ms=costs.percentile(lat, 90),
        latency_p99_ms=costs.percentile(lat, 99),
        wall_s=round(total.wall_s, 3),
        start_concurrency=total.start_concurrency,
        timeout_cuts=total.timeout_cuts,
        final_concurrency=total.final_concurrency,
        timeout_extensions=total.timeout_extensions,
        cost=total.cost,
        currency=currency,
        not_asked_budget=total.not_asked_budget,
        mode=total.mode,
        pending=total.pending,
        online_cost=total.online_spent if total.cost is not None else None,
    )
    frame = pd.DataFrame([row], columns=costs.USAGE_COLUMNS).astype(
        {c: "float64" for c in ("latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "cost", "online_cost")}
    )
    p90 = row["latency_p90_ms"]
    metadata: dict[str, dg.MetadataValue] = {
        "usage_calls": dg.MetadataValue.int(total.calls),
        "usage_cache_hits": dg.MetadataValue.int(total.cache_hits),
        "usage_prompt_tokens": dg.MetadataValue.int(total.prompt_tokens),
        "usage_completion_tokens": dg.MetadataValue.int(total.completion_tokens),
        "usage_latency_p90_ms": dg.MetadataValue.float(round(float(p90) if isinstance(p90, float) else 0.0, 1)),
    }
    if total.cost is not None and total.calls:
        metadata["usage_cost"] = dg.MetadataValue.float(round(total.cost, 6))
        metadata["usage_currency"] = dg.MetadataValue.text(currency)
    if total.not_asked_budget:
        metadata["usage_not_asked_budget"] = dg.MetadataValue.int(total.not_asked_budget)
    if total.mode == "batch":
        metadata["usage_mode"] = dg.MetadataValue.text("batch")
        metadata["usage_pending"] = dg.MetadataValue.int(total.pending)
        if total.cost is not None and total.calls:
            metadata["usage_online_cost"] = dg.MetadataValue.float(round(total.online_spent, 6))
    return frame, metadata


def _spent_before(context: dg.AssetExecutionContext, wh: Warehouse, config: JudgeConfig) -> float:
    """What the budget this step draws on has spent already, as ``judge_usage`` records it: the earlier steps of
    its run (in other processes) or, for a command's runs (tagged ``BUDGET_TAG``: the first evaluation and each
    re-evaluation of `run --wait`), of all of them. Asked only when a budget and a price table are set."""
    if not config.prices or config.budget is None:
        return 0.0
    run = context.run
    scope = run.tags.get(BUDGET_TAG)
    runs = {run.run_id, *(context.instance.get_run_ids(dg.RunsFilter(tags={BUDGET_TAG: scope})) if scope else [])}
    try:
        return spent_by_runs(wh, sorted(runs))
    except Exception:  # noqa: BLE001 - no usage view yet: nothing recorded
        return 0.0


@dataclass
class StepUsage:
    """What a judge step used, as its metadata (filled when the step's ``judge_step`` block ends)."""

    metadata: dict[str, dg.MetadataValue] = field(default_factory=dict)

    def result(self, metadata: dict[str, dg.MetadataValue]) -> dg.MaterializeResult[None]:
        """The step's result: its own ``metadata``, then what it used."""
        return dg.MaterializeResult(metadata={**metadata, **self.metadata})


@contextlib.contextmanager
def judge_step(
    context: dg.AssetExecutionContext,
    wh: Warehouse,
    judge: JudgeResource,
    rubric: RubricConfig,
    step: str,
    partition: str | None = None,
) -> Iterator[StepUsage]:
    """The body of a judge step: it draws on the run's judge budget (the judge configuration's ``budget``:
    EVAL_JUDGE_BUDGET or the resource's), and what it used is recorded in ``<rubric>.judge_usage`` (one row per
    checkpoint and step) and in the yielded ``StepUsage``'s metadata when the block ends. A judge configuration
    that is wrong, or a budget that would be overspent, fails the step in one line without a retry; whatever else
    escapes the block (or the recording) leaves as a ``dg.Failure`` with every key-like string redacted and without
    the original exception chained (its message, e.g. an error body echoing the key, would reach the event log).
    ``partition``: the usage row's checkpoint_id for a step over every checkpoint (default: the run's partition)."""
    run_id = context.run.run_id
    partition = partition or context.partition_key
    usage = StepUsage()
    try:
        config = judge.config()
    except ValueError as exc:
        raise dg.Failure(description=f"judge configuration: {exc}", allow_retries=False) from None
    try:
        scope = context.run.tags.get(BUDGET_TAG) or run_id  # whose budget: the command's, else the run's
        spending = costs.spending(scope, config.budget, config.prices, _spent_before(context, wh, config))
        with spending, costs.metering() as batches, judge_batch.for_step(partition, step):
            yield usage
        frame, usage.metadata = _usage_frame(partition, step, run_id, batches, config.prices)
        wh.replace_partition(
            rubric.name,
            Table.JUDGE_USAGE,
            frame,
            {"checkpoint_id": partition, "step": step, "run_id": run_id},
        )
    except costs.BudgetError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    except dg.Failure:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised, redacted
        message = redact(f"{type(exc).__name__}: {exc}", settings.openai_api_key() or None)
        raise dg.Failure(description=message[:2000]) from None


def _judge_metadata(
    stats: JudgeRunStats, samples: int, means: dict[str, float], latency_p50: float
) -> dict[str, dg.MetadataValue]:
    label = "heuristic (rule-based, not an LLM)" if stats.judge_kind == "heuristic" else ", ".join(stats.judges)
    return {
        "judge": dg.MetadataValue.text(label),
        "judge_kind": dg.MetadataValue.text(stats.judge_kind),
        "samples": dg.MetadataValue.int(samples),
        "prompts": dg.MetadataValue.int(stats.prompts),
        "calls": dg.MetadataValue.int(stats.calls),
        "http_attempts": dg.MetadataValue.int(stats.http_attempts),
        "cache_hits": dg.MetadataValue.int(stats.cache_hits),
        "cache_hit_rate": dg.MetadataValue.float(round(stats.cache_hit_rate, 4)),
        "missing_scores": dg.MetadataValue.int(stats.missing),
        "missing_reasons": dg.MetadataValue.json(stats.missing_reasons),
        "prompt_tokens": dg.MetadataValue.int(stats.prompt_tokens),
        "completion_tokens": dg.MetadataValue.int(stats.completion_tokens),
        "latency_ms_p50": dg.MetadataValue.float(round(latency_p50, 1)),
        "judge_wall_s": dg.MetadataValue.float(round(stats.wall_s, 3)),
        "max_in_flight": dg.MetadataValue.int(stats.max_in_flight),
        "throttling": dg.MetadataValue.text(throttling_text(stats)),
        "worker_processes": dg.MetadataValue.int(stats.processes),
        "panel_means": dg.MetadataValue.json(means),
    }


Metadata = dict[str, dg.MetadataValue]
JudgeBody = Callable[[JudgeResource, Warehouse, str], Metadata]


def judge_asset(
    rubric: RubricConfig,
    table: str,
    *,
    description: str,
    deps: Sequence[dg.AssetKey] = (),
    kinds: frozenset[str] = frozenset({"duckdb", "openai"}),
    also_writes: Sequence[Versioned] = (),
) -> Callable[[JudgeBody], dg.AssetsDefinition]:
    """One decorator for the judge's partitioned steps: ``body(judge, warehouse, checkpoint_id)`` runs inside
    ``judge_step`` (the run's budget, the usage row, a redacted one-line failure) and returns the step's own
    metadata, which the step's usage joins."""

    def decorate(body: JudgeBody) -> dg.AssetsDefinition:
        @rubric_asset(rubric, table, description=description, deps=deps, kinds=set(kinds), also_writes=also_writes)
        def step(
            context: dg.AssetExecutionContext, warehouse: WarehouseResource, judge: JudgeResource
        ) -> dg.MaterializeResult[None]:
            wh = warehouse.get()
            with judge_step(context, wh, judge, rubric, table) as usage:
                metadata = body(judge, wh, context.partition_key)
            return usage.result(metadata)

        return step

    return decorate


JUDGE_CHUNK = 5000  # samples scored and staged at a time by judge_scores


def judge_scores_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    judged = [d.key for d in rubric.judged_dimensions] + ([rubric.questionnaire.name] if rubric.questionnaire else [])

    @judge_asset(
        rubric,
        Table.JUDGE_SCORES,
        deps=[asset_key(rubric, Table.SAMPLES)],
        also_writes=[(Table.JUDGE_IDENTITY, rubric.name, Table.JUDGE_IDENTITY, {})],
        description=f"Judge scores for {', '.join(judged)}: one row per sample, judge and dimension "
        f"(judge = '{PANEL}' is the panel's aggregate). A judge answer that cannot be used is a missing score with "
        "its reason, never a score. EVAL_JUDGE=heuristic (default) is a rule-based judge, labelled 'heuristic'.",
    )
    def judge_scores(judge: JudgeResource, wh: Warehouse, ckpt_id: str) -> Metadata:
        records = to_records(rubric, load_samples(wh, rubric, ckpt_id))
        identity = judge.identity(rubric, JudgedAt(ckpt_id, wh))
        stats, means, latency_p50 = _score_in_chunks(rubric, ckpt_id, records, wh, judge, identity)
        metadata = _judge_metadata(stats, len(records), means, latency_p50)
        metadata["judge_identity"] = dg.MetadataValue.text(identity.id)
        metadata["judge"] = dg.MetadataValue.text(identity.label)
        return metadata

    return judge_scores


def _score_in_chunks(
    rubric: RubricConfig,
    ckpt_id: str,
    records: list[Record],
    wh: Warehouse,
    judge: JudgeResource,
    identity: JudgeIdentity,
) -> tuple[JudgeRunStats, dict[str, float], float]:
    """The checkpoint's judge scores written (with who judged), and the batch statistics, the panel's mean per
    dimension and the median latency."""
    stats = JudgeRunStats()
    # scored JUDGE_CHUNK samples at a time and staged, the partition replaced at once: a questionnaire rubric has ~35
    # rows a sample, so a 100k-sample checkpoint's rows would not fit in memory as one frame; who judged is recorded
    # in the same transaction
    sums: dict[str, list[float]] = {}  # the panel's ok scores per dimension, and every row's latency, kept from the
    latencies: list[np.ndarray] = []  # chunks as they are written (no query of the table after)
    with wh.partition_writer() as writer:
        who = pd.DataFrame([identity.row(ckpt_id)], columns=IDENTITY_COLUMNS)
        writer.write(rubric.name, Table.JUDGE_IDENTITY, who, {"checkpoint_id": ckpt_id})
        for start in range(0, max(len(records), 1), JUDGE_CHUNK):
            chunk = records[start : start + JUDGE_CHUNK]
            df, st = judge.score(rubric, ckpt_id, chunk, wh)
            writer.write(rubric.name, Table.JUDGE_SCORES, df, {"checkpoint_id": ckpt_id})
            stats.merge(st)
            ok = df[(df.judge == PANEL) & (df.status == "ok")]
            for dim, scores in ok.groupby("dimension").score:
                acc = sums.setdefault(str(dim), [0.0, 0])
                acc[0] += float(scores.sum())
                acc[1] += int(scores.count())
            latencies.append(df.latency_ms.dropna().to_numpy(float))
    means = {dim: round(total / n, 3) for dim, (total, n) in sums.items() if n}
    every = np.concatenate(latencies) if latencies else np.zeros(0)
    return stats, means, float(np.median(every)) if len(every) else 0.0


def extractions_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    ex = rubric.extraction
    assert ex is not None

    @judge_asset(
        rubric,
        Table.EXTRACTIONS,
        deps=[asset_key(rubric, Table.SAMPLES)],
        description=f"'{ex.name}' extracted from '{ex.text_field}' by the LLM judge (an extraction prompt, then an "
        "inference prompt). Offline, rows say so and the metric uses its own extractor.",
    )
    def extractions(judge: JudgeResource, wh: Warehouse, ckpt_id: str) -> Metadata:
        records = to_records(rubric, load_samples(wh, rubric, ckpt_id))
        df, stats = judge.extract(rubric, ckpt_id, records, wh)
        wh.replace_partition(rubric.name, Table.EXTRACTIONS, df, {"checkpoint_id": ckpt_id})
        return {
            "extractor": dg.MetadataValue.text("llm" if stats.judge_kind == "llm" else "offline"),
            "ok": dg.MetadataValue.int(int((df.status == "ok").sum())),
            "missing": dg.MetadataValue.int(int((df.status == "missing").sum())),
            "calls": dg.MetadataValue.int(stats.calls),
            "cache_hits": dg.MetadataValue.int(stats.cache_hits),
        }

    return extractions


def judge_calibration_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @judge_asset(
        rubric,
        Table.JUDGE_CALIBRATION,
        kinds=frozenset({"duckdb"}),
        description="The judge re-scores the rubric document's own worked examples ("
        + ", ".join(e.id for e in rubric.examples)
        + "); the judge-reliability gate expects each within ±1 of its "
        "stated score.",
    )
    def judge_calibration(judge: JudgeResource, wh: Warehouse, ckpt_id: str) -> Metadata:
        id_field, response_field = rubric.inputs.id_field, rubric.inputs.response_field
        records = [
            {**ex.fields, response_field: ex.response, id_field: ex.id, "sample_id": ex.id} for ex in rubric.examples
        ]
        long, stats = judge.score(rubric, ckpt_id, records, wh)
        df = calibration_rows(rubric, ckpt_id, long, judge_bar(rubric).example_tolerance)
        wh.replace_partition(rubric.name, Table.JUDGE_CALIBRATION, df, {"checkpoint_id": ckpt_id})
        return {
            "examples": dg.MetadataValue.int(len(rubric.examples)),
            "scores_within_tolerance": dg.MetadataValue.int(int(df.within_tolerance.sum())),
            "scores_checked": dg.MetadataValue.int(len(df)),
            "judge": dg.MetadataValue.text(stats.judge_kind),
            "calls": dg.MetadataValue.int(stats.calls),
        }

    return judge_calibration


def judge_repeatability_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    spec = rubric.repeat
    assert spec is not None
    dims = repeated_scores(rubric)

    @judge_asset(
        rubric,
        Table.JUDGE_REPEATABILITY,
        deps=[asset_key(rubric, Table.SAMPLES), asset_key(rubric, Table.JUDGE_SCORES)],
        description=f"The judge's own noise: {spec.samples} samples (seeded, stratified) scored {spec.times} times "
        "in all (the main run's answer and repeats, each under its own cache key); per dimension Krippendorff's "
        "alpha across the scorings, the mean within-sample SD and the share of samples whose score changed.",
    )
    def judge_repeatability(judge: JudgeResource, wh: Warehouse, ckpt_id: str) -> Metadata:
        subset = pick_subset(rubric, ckpt_id, to_records(rubric, load_samples(wh, rubric, ckpt_id)), spec)
        runs, calls = [], 0
        for r in range(spec.times):
            long, stats = judge.score(rubric, ckpt_id, subset, wh, repeat=r)
            runs.append(long)
            calls += stats.calls
        df = repeatability(ckpt_id, runs, dims)
        wh.replace_partition(rubric.name, Table.JUDGE_REPEATABILITY, df, {"checkpoint_id": ckpt_id})
        metadata: Metadata = {
            "samples": dg.MetadataValue.int(len(subset)),
            "times": dg.MetadataValue.int(spec.times),
            "calls": dg.MetadataValue.int(calls),
        }
        for row in df.itertuples():
            metadata[f"alpha_{row.dimension}"] = rounded(row.alpha_interval)
            metadata[f"share_changed_{row.dimension}"] = rounded(row.share_changed)
        return metadata

    return judge_repeatability
