"""Reading the lines of a JSON-lines file (plain or gzip) as records: a line that is not a JSON object is a record
with its reason, never the end of the import."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from eval_pipeline.ingest.importers.base import ImportFailure, Record


def open_text(path: Path) -> IO[str]:
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rt", encoding="utf-8")
        return path.open(encoding="utf-8")
    except OSError as exc:
        raise ImportFailure(f"{path}: cannot be read: {exc.strerror or exc}") from None


def json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(line, object or None, why not) for each non-blank line."""
    with open_text(path) as fh:
        try:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError as exc:
                    yield n, None, f"not JSON: {exc}"
                    continue
                if not isinstance(value, dict):
                    yield n, None, f"not a JSON object but {type(value).__name__}"
                    continue
                yield n, value, None
        except (UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
            raise ImportFailure(f"{path}: cannot be read past a bad byte or an ended gzip stream: {exc}") from None


def records(path: Path) -> Iterator[Record]:
    for n, value, why in json_lines(path):
        yield Record(n, value or {}, why, path.name)
