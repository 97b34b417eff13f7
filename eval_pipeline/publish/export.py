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
from typing import Any

import pyarrow as pa

from eval_pipeline.core.ids import check_checkpoint_id, check_identifier
from eval_pipeline.core.text import csv_cell, neutralise
from eval_pipeline.storage.tables import literal
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
    keyed = {
        (str(sch), str(t))
        for sch, t in wh.query_rows(
            "SELECT DISTINCT schema_name, table_name FROM duckdb_columns() "
            "WHERE database_name = current_database() AND column_name = 'checkpoint_id'"
        )
        if not str(t).startswith("_")
    }
    schemas = sorted({s for s, _ in keyed} - {"main"})
    chosen = list(dict.fromkeys(rubrics)) if rubrics else schemas  # a rubric named twice is exported once
    unknown = sorted(set(chosen) - set(schemas))
    if unknown:
        raise ValueError(f"no results for rubric(s) {', '.join(unknown)} in the warehouse")
    ck = literal(checkpoint_id)
    plan: list[tuple[str, str, str]] = []
    for r in chosen:
        check_identifier(r, "rubric name")
        plan += [(r, t, f'SELECT * FROM "{r}"."{t}" WHERE checkpoint_id = {ck}') for s, t in sorted(keyed) if s == r]
    rubric_list = ", ".join(literal(r) for r in chosen)
    main_tables = {
        "checkpoints": f"SELECT * FROM main.checkpoints WHERE checkpoint_id = {ck}",
        "quarantine": f"SELECT * FROM main.quarantine WHERE checkpoint_id = {ck} AND rubric IN ({rubric_list})",
        "judge_usage": f"SELECT * FROM main.judge_usage WHERE checkpoint_id = {ck} AND rubric IN ({rubric_list})",
    }
    plan += [("main", t, sql) for t, sql in main_tables.items() if ("main", t) in keyed]
    written: list[Exported] = []
    decided: dict[str, Any] = {}
    with wh.sandboxed_reader() as con:  # one reader, one snapshot for every file
        con.execute("BEGIN TRANSACTION")
        for r in chosen:  # the stored verdicts, as the console printed them
            if (r, "verdict") in keyed:
                got = con.execute(
                    f'SELECT verdict, headline_reason, trust FROM "{r}".verdict WHERE checkpoint_id = {ck}'
                ).fetchall()
                if got:
                    decided[r] = {"verdict": got[0][0], "because": got[0][1], "judge_trust": got[0][2]}
        for schema, table, sql in plan:
            result = con.execute(sql).to_arrow_table()
            if result.num_rows == 0:
                continue
            folder = out_dir / schema
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{table}.{ext}"
            _write(result, path, fmt)
            written.append(Exported(path, f"{schema}.{table}", result.num_rows))
        con.execute("COMMIT")
    if not any(e.table.split(".")[0] != "main" for e in written):
        raise ValueError(f"no results for checkpoint {checkpoint_id!r} in the warehouse")
    manifest: dict[str, Any] = {
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
