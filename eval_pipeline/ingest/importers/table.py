"""``table``: a plain table of outputs, one row a sample: CSV (with a header), JSON lines (``.jsonl``,
``.jsonl.gz``) or Parquet. The fields a mapping can name are the columns (a JSON-lines object's nested keys by
dotted path). A CSV cell is text; an empty cell is a missing value, so a mapping that needs it leaves the row out.
The model is a ``model`` column's, where every row names the same one; otherwise give ``--model``."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from eval_pipeline.ingest.importers.base import IMPORTERS, Format, ImportFailure, Record
from eval_pipeline.ingest.importers.lines import open_text, records


def read(path: Path, _extra: Path | None = None) -> Iterator[Record]:
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        yield from records(path)
    elif name.endswith(".csv"):
        with open_text(path) as fh:
            reader = csv.DictReader(fh)
            try:
                for row in reader:
                    values = {k: v for k, v in row.items() if k is not None and v not in (None, "")}
                    extra = row.get(None)
                    why = f"{len(extra)} cell(s) more than the header has" if extra else None
                    yield Record(reader.line_num, values, why, path.name)
            except csv.Error as exc:
                raise ImportFailure(f"{path}: line {reader.line_num}: not CSV: {exc}") from None
    elif name.endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow's errors are many: one line naming the file
            raise ImportFailure(f"{path}: not a Parquet file: {str(exc).splitlines()[0]}") from None
        for n, row in enumerate(table.to_pylist(), 1):
            yield Record(n, {k: v for k, v in row.items() if v is not None}, None, path.name)
    else:
        raise ImportFailure(f"{path}: a table is .csv, .jsonl, .jsonl.gz or .parquet")


IMPORTERS.add("table", Format("table", read, "a CSV, JSON-lines or Parquet table, one row a sample"))
