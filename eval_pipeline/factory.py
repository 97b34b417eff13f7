"""One factory turns each rubric config into its own Dagster asset group.

The group is named after the rubric; every asset key is ``[<rubric>, <asset>]``
and writes the table ``<rubric>.<asset>`` in the warehouse; every asset is
partitioned by checkpoint and carries the rubric's config hash as code
version. Nothing here depends on a rubric's name: what a group contains follows
from its config (judged dimensions, metrics, gates).
"""


import base64
import functools
import hashlib
import json
import os
import time
from pathlib import Path

import dagster as dg
import pandas as pd

from eval_pipeline.config import RubricConfig
from eval_pipeline.ingest import iter_jsonl
from eval_pipeline.partitions import CHECKPOINTS
from eval_pipeline.judge.extraction import extract
from eval_pipeline.judge.runner import PANEL, judge_samples
from eval_pipeline.resources import CheckpointSource, JudgeResource, WarehouseResource
from eval_pipeline.agreement.compute import AGREEMENT_COLUMNS, compute_agreement
from eval_pipeline.agreement.ratings import load_ratings
from eval_pipeline.agreement.reliability import calibration_rows, dimension_results, evaluate_judge_reliability
from eval_pipeline.comparison import compare, empty_comparison, evaluate_regression, find_parent
from eval_pipeline.gates import evaluate_gates
from eval_pipeline.metrics import compute_metrics
from eval_pipeline.metrics.style import TEXTSTAT_VERSION
from eval_pipeline.samples import load_samples, to_records
from eval_pipeline.scoring import compute_scores
from eval_pipeline.summary import headline, summarise
from eval_pipeline.report import default_report_dir, trend_svg, write_report
from eval_pipeline.views import refresh_views
from eval_pipeline.worklists import default_worklist_dir, write_worklists
from eval_pipeline.validation import empty_quarantine, validate_raw

QUARANTINE = ("main", "quarantine")
WAREHOUSE_POOL = "duckdb_warehouse"
INGEST_CHUNK_LINES = int(os.environ.get("EVAL_INGEST_CHUNK_LINES", "25000"))  # lines per chunk: bounds memory


def asset_key(rubric: RubricConfig | str, name: str) -> dg.AssetKey:
    return dg.AssetKey([rubric if isinstance(rubric, str) else rubric.name, name])


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _rubric_asset(rubric: RubricConfig, name: str, *, description: str, kinds: set[str], deps: list | None = None,
                  metadata: dict | None = None, pool: str | None = WAREHOUSE_POOL):
    """The decorator every asset of a rubric group shares: key [rubric, name], the group, the checkpoint
    partitions, the rubric's config hash as code version, and the version in the metadata.

    Assets that work on the warehouse are in the `duckdb_warehouse` concurrency pool: DuckDB lets one
    process at a time open the file, so across concurrent runs their steps take turns (set the pool's
    limit to 1 in dagster.yaml; see docs/scaling.md). Assets that call the judge (`pool=None`) stay out
    of it: they hold no connection while the calls are in flight, and their few short reads and writes
    wait on the file lock instead, so judging never blocks another run's steps."""
    asset = dg.asset(
        pool=pool,
        key=asset_key(rubric, name),
        group_name=rubric.name,
        partitions_def=CHECKPOINTS,
        code_version=rubric.version,
        deps=deps or [],
        kinds=kinds,
        description=description,
        metadata={"rubric_version": rubric.version, **(metadata or {})},
    )
    return asset if pool is None else lambda fn: asset(_holding_the_warehouse(fn))


def _holding_the_warehouse(fn):
    """Run a warehouse step with the database held open (Warehouse.hold): its many short connections
    then cost ~0.4 ms each instead of ~20 ms. Steps in the warehouse pool run one at a time anyway."""

    @functools.wraps(fn)
    def step(*args, **kwargs):
        resource = kwargs.get("warehouse") or next(a for a in args if isinstance(a, WarehouseResource))
        start = time.time()
        try:
            with resource.get().hold():
                return fn(*args, **kwargs)
        finally:
            if args and hasattr(args[0], "log"):  # the step's context: when this step had the file
                args[0].log.debug(f"warehouse held from {start:.3f} to {time.time():.3f}")

    return step


def _partition_rows(wh, rubric: RubricConfig, table: str, checkpoint_id: str, required: bool = False) -> pd.DataFrame | None:
    """One checkpoint's rows of `<rubric>.<table>`; None when the table does not exist yet, or a clear
    failure when the caller needs it (its upstream asset has never been materialized)."""
    if not wh.table_exists(rubric.name, table):
        if required:
            raise dg.Failure(f"{rubric.name}.{table} does not exist yet: materialize [{rubric.name}, {table}] first")
        return None
    return wh.query_df(f'SELECT * FROM "{rubric.name}"."{table}" WHERE checkpoint_id = ?', [checkpoint_id])


def gate_context(wh, rubric: RubricConfig, checkpoint_id: str) -> dict:
    """Evaluators for gates that need other tables (judge reliability), read from the warehouse."""
    agreement = _partition_rows(wh, rubric, "agreement", checkpoint_id)
    calibration = _partition_rows(wh, rubric, "judge_calibration", checkpoint_id)
    if agreement is None:
        agreement = pd.DataFrame(columns=AGREEMENT_COLUMNS)
    comparison = _partition_rows(wh, rubric, "comparison", checkpoint_id)
    parent = find_parent(wh.query_df("SELECT * FROM main.checkpoints"), checkpoint_id)
    return {
        "judge_reliability": lambda g: evaluate_judge_reliability(g, rubric, agreement, calibration),
        "judge_reliability_dims": lambda g: dimension_results(g, rubric, agreement, calibration),
        "regression": lambda g: evaluate_regression(g, comparison, parent, None),
    }


def _comparison_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @_rubric_asset(
        rubric,
        "comparison",
        deps=[asset_key(rubric, "scores")],
        kinds={"duckdb"},
        description="This checkpoint against its parent (or the previous one): per-score change with a seeded paired "
        "bootstrap 95 % CI over the samples both share, shares better and worse; guarded scores whose interval lies "
        "wholly on the worse side are regressions. The parent's scores must have been materialized.",
    )
    def comparison(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        parent = find_parent(wh.query_df("SELECT * FROM main.checkpoints"), ckpt_id)
        child = _partition_rows(wh, rubric, "scores", ckpt_id)
        prev = _partition_rows(wh, rubric, "scores", parent) if parent else None
        if parent is None or prev is None or prev.empty:
            df = empty_comparison()
            note = "no parent checkpoint" if parent is None else f"parent {parent} has no scores yet: evaluate it first"
        else:
            df = compare(rubric, ckpt_id, parent, child, prev)
            note = f"compared with {parent}"
        wh.replace_partition(rubric.name, "comparison", df, {"checkpoint_id": ckpt_id})
        reg = df[df.regression] if len(df) else df
        return dg.MaterializeResult(metadata={
            "parent": dg.MetadataValue.text(parent or "none"),
            "note": dg.MetadataValue.text(note),
            "regressions": dg.MetadataValue.json(list(reg.score) if len(reg) else []),
            "deltas": dg.MetadataValue.json({r.score: f"{r.delta:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]"
                                             for r in df.itertuples() if r.delta == r.delta and r.ci_low == r.ci_low}),
            "table": dg.MetadataValue.text(f"{rubric.name}.comparison"),
        })

    return comparison


def _human_ratings_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @_rubric_asset(
        rubric,
        "human_ratings",
        deps=[asset_key(rubric, "samples")],
        kinds={"duckdb", "csv"},
        description=f"Human ratings from data/human_ratings/{rubric.name}/*.csv for this checkpoint, validated: unknown "
        "sample ids, scores off the scale, unsafe evaluator names and repeated (sample, evaluator) pairs go to "
        "main.quarantine (stage 'ratings') with the reason.",
    )
    def human_ratings(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        ids = {r[0] for r in wh.query_rows(
            f'SELECT "{rubric.inputs.id_field}" FROM "{rubric.name}".samples WHERE checkpoint_id = ?', [ckpt_id])}
        load = load_ratings(rubric, ckpt_id, ids)
        wh.replace_partition(*QUARANTINE, load.quarantine, {"rubric": rubric.name, "checkpoint_id": ckpt_id, "stage": "ratings"})
        wh.replace_partition(rubric.name, "human_ratings", load.ratings, {"checkpoint_id": ckpt_id})
        r = load.ratings
        return dg.MaterializeResult(metadata={
            "rows_read": dg.MetadataValue.int(load.rows_read),
            "rated_samples": dg.MetadataValue.int(int(r.sample_id.nunique())),
            "ratings": dg.MetadataValue.int(len(r)),
            "evaluators": dg.MetadataValue.json(sorted(r.evaluator.unique().tolist())),
            "quarantined_rows": dg.MetadataValue.int(len(load.quarantine)),
            "files": dg.MetadataValue.json(load.files),
            "problems": dg.MetadataValue.json(load.problems),
            "table": dg.MetadataValue.text(f"{rubric.name}.human_ratings"),
        })

    return human_ratings


def _agreement_asset(rubric: RubricConfig, has_judge: bool) -> dg.AssetsDefinition:
    deps = [asset_key(rubric, "human_ratings")] + ([asset_key(rubric, "judge_scores")] if has_judge else [])

    @_rubric_asset(
        rubric,
        "agreement",
        deps=deps,
        kinds={"duckdb"},
        description="Agreement per dimension: percent agreement, Cohen's kappa (unweighted, linear, quadratic over the "
        "full scale), Fleiss' kappa, Krippendorff's alpha (nominal, ordinal, interval), ICC (absolute, consistency); "
        "judge vs humans: Spearman, Kendall, MAE, bias and kappa; prevalence and ceiling share beside every kappa. "
        "Rows for this checkpoint and, refreshed on every run, for ALL checkpoints.",
    )
    def agreement(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        ratings = _partition_rows(wh, rubric, "human_ratings", ckpt_id, required=True)
        judge = _partition_rows(wh, rubric, "judge_scores", ckpt_id) if has_judge else None
        df = compute_agreement(rubric, ckpt_id, ratings, judge)
        wh.replace_partition(rubric.name, "agreement", df, {"checkpoint_id": ckpt_id})
        all_ratings = wh.query_df(f'SELECT * FROM "{rubric.name}".human_ratings')
        all_judge = wh.query_df(
            f'SELECT * FROM "{rubric.name}".judge_scores WHERE judge = \'panel\'') if has_judge else None
        overall = compute_agreement(rubric, "ALL", all_ratings, all_judge)
        wh.replace_partition(rubric.name, "agreement", overall, {"checkpoint_id": "ALL"})
        jq = df[(df.raters == "judge~human_mean") & (df.statistic == "cohen_kappa_quadratic")]
        hh = df[(df.raters != "judge~human_mean") & (df.statistic == "cohen_kappa_quadratic")]
        return dg.MaterializeResult(metadata={
            "rows": dg.MetadataValue.int(len(df)),
            "judge_human_kappa_quadratic": dg.MetadataValue.json({r.dimension: round(r.value, 3) for r in jq.itertuples() if r.value == r.value}),
            "human_human_kappa_quadratic": dg.MetadataValue.json({r.dimension: round(r.value, 3) for r in hh.itertuples() if r.value == r.value}),
            "table": dg.MetadataValue.text(f"{rubric.name}.agreement"),
        })

    return agreement


def _calibration_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @_rubric_asset(
        rubric,
        "judge_calibration",
        kinds={"duckdb"},
        description="The judge re-scores the rubric document's own worked examples ("
        + ", ".join(e.id for e in rubric.examples) + "); the judge-reliability gate expects each within ±1 of its stated score.",
        pool=None,  # calls the judge: out of the warehouse pool (see _rubric_asset)
    )
    def judge_calibration(context: dg.AssetExecutionContext, warehouse: WarehouseResource, judge: JudgeResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        records = [{**ex.fields, rubric.inputs.response_field: ex.response, rubric.inputs.id_field: ex.id, "sample_id": ex.id}
                   for ex in rubric.examples]
        long, stats = judge_samples(rubric, ckpt_id, records, wh, mode=judge.mode, overrides=judge.overrides())
        tol = next((float(g.params.get("example_tolerance", 1)) for g in rubric.gates if g.kind == "judge_reliability"), 1.0)
        df = calibration_rows(rubric, ckpt_id, long, tol)
        wh.replace_partition(rubric.name, "judge_calibration", df, {"checkpoint_id": ckpt_id})
        return dg.MaterializeResult(metadata={
            "examples": dg.MetadataValue.int(len(rubric.examples)),
            "scores_within_tolerance": dg.MetadataValue.int(int(df.within_tolerance.sum())),
            "scores_checked": dg.MetadataValue.int(len(df)),
            "judge": dg.MetadataValue.text(stats.judge_kind),
            "calls": dg.MetadataValue.int(stats.calls),
            "table": dg.MetadataValue.text(f"{rubric.name}.judge_calibration"),
        })

    return judge_calibration


def _worklists_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @_rubric_asset(
        rubric,
        "worklists",
        deps=[asset_key(rubric, "samples"), asset_key(rubric, "human_ratings")],
        kinds={"csv"},
        description="Evaluator worklists as CSVs in data/worklists/<rubric>/<checkpoint>/: the stratified pilot set, the "
        "seeded 5 % spot check, the re-review list and a blank scoring sheet. Formula-like cells are neutralised.",
    )
    def worklists(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        samples = load_samples(wh, rubric, ckpt_id)
        ratings = _partition_rows(wh, rubric, "human_ratings", ckpt_id, required=True)
        counts = write_worklists(rubric, ckpt_id, samples, ratings)
        folder = default_worklist_dir() / rubric.name / ckpt_id
        return dg.MaterializeResult(metadata={
            "folder": dg.MetadataValue.path(str(folder)),
            **{name.replace(".csv", ""): dg.MetadataValue.int(n) for name, n in counts.items()},
        })

    return worklists


def _raw_outputs_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @_rubric_asset(
        rubric,
        "raw_outputs",
        kinds={"duckdb"},
        description=f"Raw model outputs of a checkpoint for '{rubric.title}': every line of "
        f"<checkpoint>/{rubric.name}.jsonl with its line number, copied into {rubric.name}.raw_outputs.",
        metadata={"source_document": rubric.source},
    )
    def raw_outputs(context: dg.AssetExecutionContext, warehouse: WarehouseResource, checkpoints: CheckpointSource) -> dg.MaterializeResult:
        ckpt = checkpoints.load(context.partition_key)
        path = ckpt.file_for(rubric.name)
        if path is None:
            raise dg.Failure(
                description=f"checkpoint {ckpt.checkpoint_id!r} has no {rubric.name}.jsonl in {ckpt.path}",
                allow_retries=False,
            )
        wh = warehouse.get()
        lines = blank = size = 0
        with wh.partition_writer() as w:  # streamed in chunks, the partition replaced in one transaction
            for chunk in iter_jsonl(path, ckpt.checkpoint_id, INGEST_CHUNK_LINES):
                w.write(rubric.name, "raw_outputs", chunk.frame, {"checkpoint_id": ckpt.checkpoint_id})
                lines += len(chunk.frame)
                blank += chunk.blank_lines
                size += chunk.bytes_read
        wh.upsert_rows(
            "main",
            "checkpoints",
            pd.DataFrame(
                [
                    {
                        "checkpoint_id": ckpt.checkpoint_id,
                        "model": ckpt.model,
                        "created_at": ckpt.created_at,
                        "parent": ckpt.parent,
                        "path": str(ckpt.path),
                    }
                ]
            ).astype({"parent": "object"}),
            key=["checkpoint_id"],
        )
        digest = _file_sha256(path)
        return dg.MaterializeResult(
            metadata={
                "lines": dg.MetadataValue.int(lines),
                "blank_lines": dg.MetadataValue.int(blank),
                "bytes": dg.MetadataValue.int(size),
                "file": dg.MetadataValue.path(str(path)),
                "file_sha256": dg.MetadataValue.text(digest),
                "model": dg.MetadataValue.text(ckpt.model),
                "table": dg.MetadataValue.text(f"{rubric.name}.raw_outputs"),
            },
            data_version=dg.DataVersion(digest[:16]),
        )

    return raw_outputs


def _samples_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @_rubric_asset(
        rubric,
        "samples",
        deps=[asset_key(rubric, "raw_outputs")],
        kinds={"duckdb", "pandera"},
        description=f"Validated samples of '{rubric.title}' (pandera schema from the rubric's input fields). "
        "Rejected lines go to main.quarantine with their reason; valid + quarantined = lines read.",
    )
    def samples(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        seen: set[str] = set()
        n_read = n_valid = n_bad = 0
        reasons: dict[str, int] = {}
        # chunk by chunk from one ordered, streaming read of the raw lines; both partitions are swapped in
        # at the end, together; the quarantine is written before anything can fail, so a checkpoint with
        # nothing valid keeps its lines
        with wh.partition_writer() as w:
            w.write(*QUARANTINE, empty_quarantine(),
                    {"rubric": rubric.name, "checkpoint_id": ckpt_id, "stage": "validate"})
            for raw in wh.stream_df(f'SELECT * FROM "{rubric.name}".raw_outputs WHERE checkpoint_id = ? '
                                    "ORDER BY line_number", [ckpt_id], INGEST_CHUNK_LINES):
                result = validate_raw(rubric, raw, seen_ids=seen)
                w.write(*QUARANTINE, result.quarantine, {"rubric": rubric.name, "checkpoint_id": ckpt_id, "stage": "validate"})
                w.write(rubric.name, "samples", result.samples, {"checkpoint_id": ckpt_id})
                n_read += result.lines_read
                n_valid += len(result.samples)
                n_bad += len(result.quarantine)
                for k, v in result.reasons.items():
                    reasons[k] = reasons.get(k, 0) + v
            if n_read == 0:  # an empty file: an empty partition, with the table's columns
                empty = wh.query_df(f'SELECT * FROM "{rubric.name}".raw_outputs LIMIT 0')
                w.write(rubric.name, "samples", validate_raw(rubric, empty).samples, {"checkpoint_id": ckpt_id})
        if n_valid + n_bad != n_read:  # pragma: no cover - invariant
            raise dg.Failure(f"row accounting broken: {n_valid} valid + {n_bad} quarantined != {n_read} read")
        metadata = {
            "lines_read": dg.MetadataValue.int(n_read),
            "valid": dg.MetadataValue.int(n_valid),
            "quarantined": dg.MetadataValue.int(n_bad),
            "quarantine_reasons": dg.MetadataValue.json(reasons),
            "table": dg.MetadataValue.text(f"{rubric.name}.samples"),
            "dagster/row_count": dg.MetadataValue.int(n_valid),
        }
        if n_valid == 0:
            raise dg.Failure(
                description=f"checkpoint {ckpt_id!r}: none of the {n_read} lines of {rubric.name}.jsonl is a valid sample "
                f"({n_bad} quarantined; see main.quarantine)",
                metadata=metadata,
                allow_retries=False,
            )
        return dg.MaterializeResult(metadata=metadata)

    return samples


def _judge_scores_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    judged = [d.key for d in rubric.judged_dimensions] + ([rubric.questionnaire.name] if rubric.questionnaire else [])

    @_rubric_asset(
        rubric,
        "judge_scores",
        deps=[asset_key(rubric, "samples")],
        kinds={"duckdb", "openai"},
        description=f"Judge scores for {', '.join(judged)}: one row per sample, judge and dimension "
        "(judge = 'panel' is the panel's aggregate). A judge answer that cannot be used is a missing score with its "
        "reason, never a score. EVAL_JUDGE=heuristic (default) is a rule-based judge, labelled 'heuristic'.",
        pool=None,  # calls the judge: out of the warehouse pool (see _rubric_asset)
    )
    def judge_scores(context: dg.AssetExecutionContext, warehouse: WarehouseResource, judge: JudgeResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        records = to_records(rubric, load_samples(wh, rubric, ckpt_id))
        df, stats = judge_samples(rubric, ckpt_id, records, wh, mode=judge.mode, overrides=judge.overrides())
        wh.replace_partition(rubric.name, "judge_scores", df, {"checkpoint_id": ckpt_id})
        panel = df[df.judge == PANEL]
        means = panel[panel.status == "ok"].groupby("dimension")["score"].mean().round(3).to_dict()
        lat = df.loc[df.latency_ms.notna(), "latency_ms"]
        return dg.MaterializeResult(
            metadata={
                "judge": dg.MetadataValue.text(
                    "heuristic (rule-based, not an LLM)" if stats.judge_kind == "heuristic" else ", ".join(stats.judges)
                ),
                "judge_kind": dg.MetadataValue.text(stats.judge_kind),
                "samples": dg.MetadataValue.int(len(records)),
                "prompts": dg.MetadataValue.int(stats.prompts),
                "calls": dg.MetadataValue.int(stats.calls),
                "http_attempts": dg.MetadataValue.int(stats.http_attempts),
                "cache_hits": dg.MetadataValue.int(stats.cache_hits),
                "cache_hit_rate": dg.MetadataValue.float(round(stats.cache_hit_rate, 4)),
                "missing_scores": dg.MetadataValue.int(stats.missing),
                "missing_reasons": dg.MetadataValue.json(stats.missing_reasons),
                "prompt_tokens": dg.MetadataValue.int(stats.prompt_tokens),
                "completion_tokens": dg.MetadataValue.int(stats.completion_tokens),
                "latency_ms_p50": dg.MetadataValue.float(float(lat.median()) if len(lat) else 0.0),
                "judge_wall_s": dg.MetadataValue.float(round(stats.wall_s, 3)),
                "max_in_flight": dg.MetadataValue.int(stats.max_in_flight),
                "worker_processes": dg.MetadataValue.int(stats.processes),
                "panel_means": dg.MetadataValue.json(means),
                "table": dg.MetadataValue.text(f"{rubric.name}.judge_scores"),
            }
        )

    return judge_scores


def _extractions_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    ex = rubric.extraction

    @_rubric_asset(
        rubric,
        "extractions",
        deps=[asset_key(rubric, "samples")],
        kinds={"duckdb", "openai"},
        description=f"'{ex.name}' extracted from '{ex.text_field}' by the LLM judge (an extraction prompt, then an "
        "inference prompt). Offline, rows say so and the metric uses its own extractor.",
        pool=None,  # calls the judge: out of the warehouse pool (see _rubric_asset)
    )
    def extractions(context: dg.AssetExecutionContext, warehouse: WarehouseResource, judge: JudgeResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        records = to_records(rubric, load_samples(wh, rubric, ckpt_id))
        df, stats = extract(rubric, ckpt_id, records, wh, judge.mode, judge.overrides())
        wh.replace_partition(rubric.name, "extractions", df, {"checkpoint_id": ckpt_id})
        return dg.MaterializeResult(metadata={
            "extractor": dg.MetadataValue.text("llm" if stats.judge_kind == "llm" else "offline"),
            "ok": dg.MetadataValue.int(int((df.status == "ok").sum())),
            "missing": dg.MetadataValue.int(int((df.status == "missing").sum())),
            "calls": dg.MetadataValue.int(stats.calls),
            "cache_hits": dg.MetadataValue.int(stats.cache_hits),
            "table": dg.MetadataValue.text(f"{rubric.name}.extractions"),
        })

    return extractions


def _with_extractions(wh, rubric: RubricConfig, ckpt_id: str, records: list[dict]) -> list[dict]:
    """Merge LLM extractions (where they succeeded) into the records under the extraction's name."""
    ex = rubric.extraction
    if ex is None or not wh.table_exists(rubric.name, "extractions"):
        return records
    rows = wh.query_rows(
        f'SELECT sample_id, items FROM "{rubric.name}".extractions WHERE checkpoint_id = ? AND status = \'ok\'', [ckpt_id]
    )
    found = {sid: json.loads(items) for sid, items in rows}
    return [{**r, ex.name: found.get(r["sample_id"])} for r in records]


def _metrics_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @_rubric_asset(
        rubric,
        "metrics",
        deps=[asset_key(rubric, "samples")] + ([asset_key(rubric, "extractions")] if rubric.extraction else []),
        kinds={"duckdb", "python"},
        description="Deterministic per-sample metrics: " + ", ".join(m.function for m in rubric.metrics) + ".",
        metadata={"textstat_version": TEXTSTAT_VERSION},
    )
    def metrics(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        records = _with_extractions(wh, rubric, ckpt_id, to_records(rubric, load_samples(wh, rubric, ckpt_id)))
        t0 = time.perf_counter()
        df = compute_metrics(rubric.metrics, records)
        secs = time.perf_counter() - t0
        df.insert(0, "checkpoint_id", ckpt_id)
        df["rubric_version"] = rubric.version
        wh.replace_partition(rubric.name, "metrics", df, {"checkpoint_id": ckpt_id})
        numeric = df.select_dtypes("number").drop(columns=[], errors="ignore")
        means = {c: round(float(numeric[c].mean()), 4) for c in numeric.columns if numeric[c].notna().any()}
        return dg.MaterializeResult(metadata={
            "samples": dg.MetadataValue.int(len(df)),
            "means": dg.MetadataValue.json(means),
            "compute_s": dg.MetadataValue.float(round(secs, 3)),
            "textstat_version": dg.MetadataValue.text(TEXTSTAT_VERSION),
            "table": dg.MetadataValue.text(f"{rubric.name}.metrics"),
        })

    return metrics


def _scores_asset(rubric: RubricConfig, has_judge: bool, has_metrics: bool) -> dg.AssetsDefinition:
    deps = [asset_key(rubric, "samples")]
    if has_judge:
        deps.append(asset_key(rubric, "judge_scores"))
    if has_metrics:
        deps.append(asset_key(rubric, "metrics"))

    @_rubric_asset(
        rubric,
        "scores",
        deps=deps,
        kinds={"duckdb"},
        description="One row per sample: the judge panel's dimension scores, metrics, adjustments (with the judge's "
        "original score and the reason) and the derived scores the rubric declares.",
    )
    def scores(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        samples = load_samples(wh, rubric, ckpt_id)
        judge = _partition_rows(wh, rubric, "judge_scores", ckpt_id, required=True) if has_judge else None
        mets = _partition_rows(wh, rubric, "metrics", ckpt_id, required=True) if has_metrics else None
        if mets is not None:
            mets = mets.drop(columns=["checkpoint_id", "rubric_version"])
        df = compute_scores(rubric, ckpt_id, samples, judge, mets)
        wh.replace_partition(rubric.name, "scores", df, {"checkpoint_id": ckpt_id})
        head = pd.to_numeric(df[rubric.headline], errors="coerce") if rubric.headline in df.columns else pd.Series(dtype=float)
        return dg.MaterializeResult(metadata={
            "samples": dg.MetadataValue.int(len(df)),
            "headline": dg.MetadataValue.text(rubric.headline),
            "headline_mean": dg.MetadataValue.float(float(head.mean()) if head.notna().any() else float("nan")),
            "samples_with_missing_scores": dg.MetadataValue.int(int((df["missing_dimensions"] > 0).sum())),
            "adjusted_samples": dg.MetadataValue.int(int(df["adjusted"].sum())),
            "table": dg.MetadataValue.text(f"{rubric.name}.scores"),
        })

    return scores


def _summary_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @_rubric_asset(
        rubric,
        "summary",
        deps=[asset_key(rubric, "scores")],
        kinds={"duckdb"},
        description="Per checkpoint and score: n, mean, standard deviation, seeded 95 % bootstrap CI and pass rate; "
        "overall and by " + (", ".join(" x ".join(b) for b in rubric.breakdowns) or "no breakdown") + ".",
    )
    def summary(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        scores = _partition_rows(wh, rubric, "scores", ckpt_id, required=True)
        df = summarise(rubric, ckpt_id, scores)
        wh.replace_partition(rubric.name, "summary", df, {"checkpoint_id": ckpt_id})
        refresh_views(wh)
        overall = df[df.breakdown == "all"]
        table = {r.score: f"{r.mean:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}] n={r.n}" for r in overall.itertuples()
                 if r.mean == r.mean and r.ci_low == r.ci_low}
        hl = headline(rubric, df)
        chart = _trend_markdown(wh, rubric)
        return dg.MaterializeResult(metadata={
            "trend_chart": dg.MetadataValue.md(chart),
            "headline": dg.MetadataValue.text(rubric.headline),
            "headline_mean": dg.MetadataValue.float(hl if hl is not None else float("nan")),
            "overall": dg.MetadataValue.json(table),
            "table": dg.MetadataValue.text(f"{rubric.name}.summary"),
        })

    return summary


def _trend_markdown(wh, rubric: RubricConfig) -> str:
    """The headline and judged scores across checkpoints with 95 % CIs, as an inline SVG image for the UI."""
    df = wh.query_df(
        f"""SELECT s.checkpoint_id AS checkpoint, s.score, s.mean, s.ci_low, s.ci_high FROM "{rubric.name}".summary s
            JOIN main.checkpoints c USING (checkpoint_id)
            WHERE s.breakdown = 'all' AND s.score = ? ORDER BY c.created_at, s.checkpoint_id""", [rubric.headline])
    svg = trend_svg(df, f"{rubric.headline} by checkpoint (95 % CI)")
    if not svg:
        return "(no data yet)"
    data = base64.b64encode(svg.encode()).decode()
    return f"![{rubric.headline} trend](data:image/svg+xml;base64,{data})"


def _gates_asset(rubric: RubricConfig, extra_deps: list[dg.AssetKey]) -> list:
    key = asset_key(rubric, "gates")

    @dg.asset(
        key=key,
        group_name=rubric.name,
        partitions_def=CHECKPOINTS,
        code_version=rubric.version,
        deps=[asset_key(rubric, "scores"), *extra_deps],
        kinds={"duckdb"},
        description="Threshold gates from the rubric YAML (" + ", ".join(g.name for g in rubric.gates) + "); "
        "each is also an asset check on this asset. Too little data fails closed.",
        metadata={"rubric_version": rubric.version},
    )
    def gates(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        with wh.session() as reader:
            scores = _partition_rows(reader, rubric, "scores", ckpt_id, required=True)
            df = evaluate_gates(rubric, ckpt_id, scores, gate_context(reader, rubric, ckpt_id))
        wh.replace_partition(rubric.name, "gates", df, {"checkpoint_id": ckpt_id})
        refresh_views(wh)
        report = write_report(wh, default_report_dir())  # the report follows every evaluated checkpoint
        return dg.MaterializeResult(metadata={
            "passed": dg.MetadataValue.int(int(df.passed.sum())),
            "total": dg.MetadataValue.int(len(df)),
            "failed_gates": dg.MetadataValue.json({r.gate: r.reason for r in df.itertuples() if not r.passed}),
            "table": dg.MetadataValue.text(f"{rubric.name}.gates"),
            "report": dg.MetadataValue.path(str(report)),
        })

    return [gates, _gate_checks(rubric, key)]


def _gate_checks(rubric: RubricConfig, gates_key: dg.AssetKey) -> dg.AssetChecksDefinition:
    """Every gate as an asset check, in one step per checkpoint (one step per gate costs ~0.4 s each in Dagster).

    The judge-reliability gate shows beside the judge's scores; the others on the gates asset."""
    judged = bool(rubric.judged_dimensions or rubric.questionnaire)
    specs, targets = [], {}
    names: list[str] = []
    for g in rubric.gates:
        target = asset_key(rubric, "judge_scores") if g.kind == "judge_reliability" and judged else gates_key
        per_dim = [f"{g.name}_{d}" for d in rubric.rating_scales] if g.kind == "judge_reliability" and judged else []
        for name in [g.name, *per_dim]:
            targets[name] = target
            names.append(name)
            specs.append(dg.AssetCheckSpec(
                name, asset=target, partitions_def=CHECKPOINTS,
                additional_deps=[gates_key] if target != gates_key else None,
                description=g.description or f"{g.kind} {g.threshold:g}",
                metadata={"kind": g.kind, "threshold": g.threshold, "min_samples": g.min_samples},
            ))

    @dg.multi_asset_check(specs=specs, name=f"{rubric.name}__gate_checks", can_subset=True, pool=WAREHOUSE_POOL)
    @_holding_the_warehouse
    def gate_checks(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource):
        ckpt_id = context.partition_key
        rows = _partition_rows(warehouse.get(), rubric, "gates", ckpt_id)
        by_gate = {} if rows is None else {r["gate"]: r for r in rows.to_dict("records")}  # none: every gate fails closed
        selected = {k.name for k in context.selected_asset_check_keys}
        for name in names:
            if name not in selected:
                continue
            r = by_gate.get(name)
            if r is None:
                yield dg.AssetCheckResult(check_name=name, asset_key=targets[name], passed=False,
                                          severity=dg.AssetCheckSeverity.ERROR,
                                          metadata={"reason": "fails closed: gate not evaluated for this checkpoint"})
                continue
            value = None if pd.isna(r["value"]) else float(r["value"])
            yield dg.AssetCheckResult(
                check_name=name, asset_key=targets[name], passed=bool(r["passed"]), severity=dg.AssetCheckSeverity.ERROR,
                metadata={"value": dg.MetadataValue.float(value) if value is not None else dg.MetadataValue.text("n/a"),
                          "threshold": dg.MetadataValue.float(float(r["threshold"])), "n": dg.MetadataValue.int(int(r["n"])),
                          "reason": dg.MetadataValue.text(str(r["reason"]))},
                description=str(r["reason"]),
            )

    return gate_checks


def build_rubric_assets(rubric: RubricConfig) -> list[dg.AssetsDefinition | dg.AssetChecksDefinition]:
    """All assets and checks of one rubric's group, derived from its config alone."""
    defs: list = [_raw_outputs_asset(rubric), _samples_asset(rubric)]
    has_judge = bool(rubric.judged_dimensions or rubric.questionnaire)
    if has_judge:
        defs.append(_judge_scores_asset(rubric))
    if rubric.extraction:
        defs.append(_extractions_asset(rubric))
    if rubric.metrics:
        defs.append(_metrics_asset(rubric))
    defs.append(_scores_asset(rubric, has_judge, bool(rubric.metrics)))
    defs.append(_summary_asset(rubric))
    defs.append(_human_ratings_asset(rubric))
    defs.append(_agreement_asset(rubric, has_judge))
    defs.append(_comparison_asset(rubric))
    gate_deps = [asset_key(rubric, "agreement"), asset_key(rubric, "comparison")]
    if has_judge and rubric.examples:
        defs.append(_calibration_asset(rubric))
        gate_deps.append(asset_key(rubric, "judge_calibration"))
    defs.append(_worklists_asset(rubric))
    if rubric.gates:
        defs.extend(_gates_asset(rubric, gate_deps))
    return defs
