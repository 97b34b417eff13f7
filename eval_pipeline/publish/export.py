"""A checkpoint's results out of the tool: every table of each rubric filtered to the checkpoint, its quarantine
rows, its judge usage and its manifest row, as Parquet, CSV or JSON lines files in one folder, with a
``manifest.json`` that says what each file holds. Read through the sandboxed reader (nothing in the warehouse
can change), written by Python (the reader itself cannot write files)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from eval_pipeline.core.ids import check_checkpoint_id, check_identifier
from eval_pipeline.core.text import csv_cell, neutralise
from eval_pipeline.core.types import JSONObject
from eval_pipeline.publish.queries import checkpoint_keyed_tables, checkpoint_snapshot
from eval_pipeline.storage.warehouse import Warehouse

FORMATS = ("parquet", "csv", "json")


@dataclass
class Exported:
    path: Path
    table: str
    rows: int


def _write(table: pa.Table, path: Path, fmt: str) -> None:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    elif fmt == "csv":  # a spreadsheet opening the file runs no formula a model wrote
        import csv

        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow([neutralise(c) for c in table.column_names])
            for row in table.to_pylist():
                writer.writerow([csv_cell(v) for v in row.values()])
    else:
        with path.open("w", encoding="utf-8") as fh:
            for row in table.to_pylist():
                fh.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")


def export_checkpoint(
    wh: Warehouse, checkpoint_id: str, rubrics: list[str] | None, out_dir: Path, fmt: str = "parquet"
) -> list[Exported]:
    """Write the checkpoint's rows of every table of ``rubrics`` (default: every rubric that has any) into
    ``out_dir/<rubric>/<table>.<fmt>``, and ``out_dir/main/<table>.<fmt>`` for its manifest, quarantine and
    judge-usage rows; returns what was written (a table without rows for it is left out). Whole or not at all:
    the files are written into a folder beside ``out_dir`` that becomes it once the manifest is written; an export
    that fails midway (a full disk) leaves nothing."""
    staging = out_dir.with_name(f".{out_dir.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        written = _export(wh, checkpoint_id, rubrics, staging, fmt)
        if out_dir.is_dir():
            out_dir.rmdir()  # empty (the CLI refuses a folder that is not): replaced by the whole export
        os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [Exported(out_dir / e.path.relative_to(staging), e.table, e.rows) for e in written]


def _export(wh: Warehouse, checkpoint_id: str, rubrics: list[str] | None, out_dir: Path, fmt: str) -> list[Exported]:
    check_checkpoint_id(checkpoint_id)
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}")
    ext = {"parquet": "parquet", "csv": "csv", "json": "jsonl"}[fmt]
    keyed = checkpoint_keyed_tables(wh)
    schemas = sorted({s for s, _ in keyed} - {"main"})
    chosen = list(dict.fromkeys(rubrics)) if rubrics else schemas  # a rubric named twice is exported once
    unknown = sorted(set(chosen) - set(schemas))
    if unknown:
        raise ValueError(f"no results for rubric(s) {', '.join(unknown)} in the warehouse")
    for r in chosen:
        check_identifier(r, "rubric name")
    written: list[Exported] = []
    with checkpoint_snapshot(wh, checkpoint_id, chosen, keyed) as snap:  # one reader, one snapshot for every file
        decided = snap.verdicts()  # the stored verdicts, as the console printed them
        for schema, table, result in snap.tables():
            if result.num_rows == 0:
                continue
            folder = out_dir / schema
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{table}.{ext}"
            _write(result, path, fmt)
            written.append(Exported(path, f"{schema}.{table}", result.num_rows))
    if not any(e.table.split(".")[0] != "main" for e in written):
        raise ValueError(f"no results for checkpoint {checkpoint_id!r} in the warehouse")
    manifest: JSONObject = {
        "checkpoint_id": checkpoint_id,
        "rubrics": chosen,
        "warehouse": wh.describe(),
        "exported_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "format": fmt,
        "verdicts": decided,
        "files": [{"path": str(e.path.relative_to(out_dir)), "table": e.table, "rows": e.rows} for e in written],
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return written
