"""Reading raw model outputs (JSONL) line by line, keeping every line.

Each non-blank line becomes one row with its number and text; a line that is
not valid UTF-8 is kept (with the bad bytes escaped) and flagged, so validation
can quarantine it with its reason. A byte-order mark on the first line is
dropped. Blank lines are counted but are not rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from eval_pipeline.core.contracts import RAW_COLUMNS

BOM = b"\xef\xbb\xbf"


@dataclass
class RawRead:
    frame: pd.DataFrame
    blank_lines: int
    bytes_read: int


def iter_jsonl(
    path: Path, checkpoint_id: str, chunk_lines: int = 100_000, source_file: str | None = None
) -> Iterator[RawRead]:
    """The file in chunks of at most `chunk_lines` non-blank lines, so memory stays bounded for huge files."""
    source_file = source_file or path.name
    numbers: list[int] = []
    texts: list[str] = []
    errors: list[str | None] = []
    blank = 0
    size = 0
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            size += len(raw)
            if number == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                blank += 1
                continue
            try:
                text, err = line.decode("utf-8"), None
            except UnicodeDecodeError as exc:
                text = line.decode("utf-8", errors="backslashreplace")
                err = f"not valid UTF-8 (byte {exc.start}: {exc.reason})"
            numbers.append(number)
            texts.append(text)
            errors.append(err)
            if len(numbers) >= chunk_lines:
                yield RawRead(_frame(checkpoint_id, source_file, numbers, texts, errors), blank, size)
                numbers, texts, errors, blank, size = [], [], [], 0, 0
    if numbers or blank or size:
        yield RawRead(_frame(checkpoint_id, source_file, numbers, texts, errors), blank, size)


def read_jsonl(path: Path, checkpoint_id: str, source_file: str | None = None) -> RawRead:
    """The whole file as one frame (small files and tests)."""
    parts = list(iter_jsonl(path, checkpoint_id, chunk_lines=1 << 62, source_file=source_file))
    if not parts:
        return RawRead(_frame(checkpoint_id, source_file or path.name, [], [], []), 0, 0)
    return RawRead(
        pd.concat([p.frame for p in parts], ignore_index=True),
        sum(p.blank_lines for p in parts),
        sum(p.bytes_read for p in parts),
    )


def _frame(checkpoint_id: str, source_file: str, numbers: list[int], texts: list[str], errors: list) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "checkpoint_id": checkpoint_id,
            "source_file": source_file,
            "line_number": pd.Series(numbers, dtype="int64"),
            "raw_line": pd.Series(texts, dtype="object"),
            "decode_error": pd.Series(errors, dtype="object"),
        },
        columns=RAW_COLUMNS,
    )
