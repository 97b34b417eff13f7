"""Ingest: raw model outputs of a checkpoint, validated samples (and the quarantine), human ratings."""

import hashlib
from collections.abc import Iterator

import dagster as dg
import pandas as pd
import pyarrow as pa

from eval_pipeline.core import settings
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import CHECKPOINTS, QUARANTINE, Table
from eval_pipeline.defs.asset import asset_key, rubric_asset
from eval_pipeline.defs.partitions import CHECKPOINTS_PARTITION
from eval_pipeline.defs.resources import CheckpointSource, RatingsSource, WarehouseResource
from eval_pipeline.ingest.checkpoints import CheckpointError
from eval_pipeline.ingest.jsonl import RAW_SCHEMA, iter_jsonl
from eval_pipeline.ingest.judged import empty as empty_judged
from eval_pipeline.ingest.judged import read_judged
from eval_pipeline.ingest.ratings import SOURCES, concerning, files_version, load_ratings


def raw_outputs_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @rubric_asset(
        rubric,
        Table.RAW_OUTPUTS,
        kinds={"duckdb"},
        also_writes=[(Table.IMPORTED_SCORES, rubric.name, Table.IMPORTED_SCORES, {})],
        description=f"Raw model outputs of a checkpoint for '{rubric.title}': every line of "
        f"<checkpoint>/{rubric.name}.jsonl with its line number, copied into {rubric.name}.raw_outputs; the "
        f"scores of a judge the team already ran (<checkpoint>/{rubric.name}.judge.json), when the checkpoint "
        f"brings them, into {rubric.name}.imported_scores.",
        metadata={"source_document": rubric.source},
    )
    def raw_outputs(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource, checkpoints: CheckpointSource
    ) -> dg.MaterializeResult[None]:
        ckpt = checkpoints.load(context.partition_key)
        path = ckpt.file_for(rubric.name)
        if path is None:
            raise dg.Failure(
                description=f"checkpoint {ckpt.checkpoint_id!r} has no {rubric.name}.jsonl in "
                f"{checkpoints.location(ckpt.checkpoint_id)}",
                allow_retries=False,
            )
        wh = warehouse.get()
        judged_path = ckpt.judged_for(rubric.name)
        try:
            judged = read_judged(judged_path, rubric, ckpt.checkpoint_id) if judged_path else empty_judged()
        except CheckpointError as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from None
        blank = size = 0
        sha256 = hashlib.sha256()  # of the bytes as they are read: the file is read once

        def batches() -> Iterator[pa.RecordBatch]:
            nonlocal blank, size
            for chunk in iter_jsonl(path, ckpt.checkpoint_id, digest=sha256):
                blank += chunk.blank_lines
                size += chunk.bytes_read
                yield from chunk.table.to_batches()

        # streamed in blocks of the file, the partition replaced at once
        with wh.partition_writer(fixed_columns=True) as w:
            stream = pa.RecordBatchReader.from_batches(RAW_SCHEMA, batches())
            lines = w.write_stream(rubric.name, Table.RAW_OUTPUTS, stream, {"checkpoint_id": ckpt.checkpoint_id})
            w.write(rubric.name, Table.IMPORTED_SCORES, judged, {"checkpoint_id": ckpt.checkpoint_id})
        row = {
            "checkpoint_id": ckpt.checkpoint_id,
            "model": ckpt.model,
            "created_at": ckpt.created_at,
            "parent": ckpt.parent,
            "path": checkpoints.location(ckpt.checkpoint_id),  # where it landed (s3://…, not this machine's copy)
        }
        # the checkpoint's row replaced as a partition of its own: held with the range's others (Warehouse.batched)
        wh.replace_partition(
            *CHECKPOINTS, pd.DataFrame([row]).astype({"parent": "object"}), {"checkpoint_id": ckpt.checkpoint_id}
        )
        digest = sha256.hexdigest()
        return dg.MaterializeResult(
            metadata={
                "lines": dg.MetadataValue.int(lines),
                "blank_lines": dg.MetadataValue.int(blank),
                "bytes": dg.MetadataValue.int(size),
                "file": dg.MetadataValue.path(f"{checkpoints.location(ckpt.checkpoint_id)}/{path.name}"),
                "file_sha256": dg.MetadataValue.text(digest),
                "model": dg.MetadataValue.text(ckpt.model),
                "imported_judge_scores": dg.MetadataValue.int(int(judged.score.notna().sum())),
            },
            data_version=dg.DataVersion(digest[:16]),
        )

    return raw_outputs


def samples_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @rubric_asset(
        rubric,
        Table.SAMPLES,
        deps=[asset_key(rubric, Table.RAW_OUTPUTS)],
        also_writes=[("quarantine_validate", *QUARANTINE, {"rubric": rubric.name, "stage": "validate"})],
        kinds={"duckdb", "pandera"},
        description=f"Validated samples of '{rubric.title}' (pandera schema from the rubric's input fields). "
        "Rejected lines go to main.quarantine with their reason; valid + quarantined = lines read.",
    )
    def samples(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult[None]:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        where = {"rubric": rubric.name, "checkpoint_id": ckpt_id, "stage": "validate"}
        # judged in the engine, range by range of line numbers; then one transaction replaces both partitions, the
        # samples made from raw_outputs inside the engine, so a checkpoint with nothing valid still keeps its
        # quarantined lines
        with wh.bulk():
            with wh.connect(reads=[(rubric.name, Table.RAW_OUTPUTS)]) as con:  # the range's held samples stay held
                from eval_pipeline.ingest.engine import EngineValidation, raw_outputs_of  # pandera, polars: slow

                src = raw_outputs_of(rubric, ckpt_id)
                engine = EngineValidation(con, rubric, src, ckpt_id, chunk_lines=settings.ingest_chunk_lines())
                engine.run()
                quarantine = engine.quarantine()
            written, _ = wh.replace_partitions(
                [
                    (rubric.name, Table.SAMPLES, {"checkpoint_id": ckpt_id}, [engine.samples()]),
                    (*QUARANTINE, where, [quarantine]),
                ]
            )
        n_read, n_valid, n_bad, reasons = engine.lines_read, engine.valid, len(quarantine), engine.reason_counts()
        if written != n_valid or n_valid + n_bad != n_read:  # pragma: no cover - invariant
            raise dg.Failure(
                f"row accounting broken: {written} written, {n_valid} valid + {n_bad} quarantined, {n_read} read"
            )
        metadata = {
            "lines_read": dg.MetadataValue.int(n_read),
            "valid": dg.MetadataValue.int(n_valid),
            "quarantined": dg.MetadataValue.int(n_bad),
            "quarantine_reasons": dg.MetadataValue.json(reasons),
        }
        if n_valid == 0:
            raise dg.Failure(
                description=f"checkpoint {ckpt_id!r}: none of the {n_read} lines of {rubric.name}.jsonl is a valid "
                f"sample ({n_bad} quarantined; see main.quarantine)",
                metadata=metadata,
                allow_retries=False,
            )
        return dg.MaterializeResult(metadata=metadata)

    return samples


def human_ratings_asset(rubric: RubricConfig) -> dg.AssetsDefinition:
    @rubric_asset(
        rubric,
        Table.HUMAN_RATINGS,
        deps=[asset_key(rubric, Table.SAMPLES)],
        also_writes=[("quarantine_ratings", *QUARANTINE, {"rubric": rubric.name, "stage": "ratings"})],
        kinds={"duckdb", "csv"},
        description=f"Human ratings from data/human_ratings/{rubric.name}/*.csv for this checkpoint, validated: "
        "unknown sample ids, scores off the scale, unsafe evaluator names and repeated (sample, evaluator) pairs go "
        "to main.quarantine (stage 'ratings') with the reason.",
    )
    def human_ratings(
        context: dg.AssetExecutionContext,
        warehouse: WarehouseResource,
        ratings: RatingsSource,
        checkpoints: CheckpointSource,
    ) -> dg.MaterializeResult[None]:
        ckpt_id = context.partition_key
        wh = warehouse.get()
        id_field = rubric.inputs.id_field
        ids = set(wh.read(rubric.name, Table.SAMPLES, columns=(id_field,), where={"checkpoint_id": ckpt_id})[id_field])
        # every checkpoint there is: registered, or a folder not registered yet (a run registers only its own)
        registered = set(context.instance.get_dynamic_partitions(CHECKPOINTS_PARTITION))
        known = registered | checkpoints.names()
        local = ratings.folder(rubric.name)  # an s3:// folder mirrored now
        # the version of the files that concern it, before reading: a later write is seen later
        files = concerning(rubric.name, local, [ckpt_id], registered)[ckpt_id]
        version = files_version(files)
        load = load_ratings(rubric, ckpt_id, ids, root=local, known_checkpoints=known | {ckpt_id})
        source = pd.DataFrame(
            [{"checkpoint_id": ckpt_id, "fingerprint": version, "files": len(files), "rows": len(load.ratings),
              "read_at": pd.Timestamp.now(tz="UTC")}]
        )  # fmt: skip
        with wh.partition_writer() as w:  # the ratings, their quarantine and the folder's version in one transaction
            w.write(*QUARANTINE, load.quarantine, {"rubric": rubric.name, "checkpoint_id": ckpt_id, "stage": "ratings"})
            w.write(rubric.name, Table.HUMAN_RATINGS, load.ratings, {"checkpoint_id": ckpt_id})
            w.write(rubric.name, SOURCES, source, {"checkpoint_id": ckpt_id})
        r = load.ratings
        return dg.MaterializeResult(
            metadata={
                "rows_read": dg.MetadataValue.int(load.rows_read),
                "rated_samples": dg.MetadataValue.int(int(r.sample_id.nunique())),
                "ratings": dg.MetadataValue.int(len(r)),
                "evaluators": dg.MetadataValue.json(sorted(r.evaluator.unique().tolist())),
                "quarantined_rows": dg.MetadataValue.int(len(load.quarantine)),
                "files": dg.MetadataValue.json(load.files),
                "problems": dg.MetadataValue.json(load.problems),
            }
        )

    return human_ratings
