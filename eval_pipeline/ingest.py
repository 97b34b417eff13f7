"""Reading raw model outputs (JSONL) line by line, keeping every line.

Each non-blank line becomes one row with its number and text; a line that is
not valid UTF-8 is kept (with the bad bytes escaped) and flagged, so validation
can quarantine it with its reason. A byte-order mark on the first line is
dropped. Blank lines are counted but are not rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

RAW_COLUMNS = ["checkpoint_id", "source_file", "line_number", "raw_line", "decode_error"]
BOM = b"\xef\xbb\xbf"


@dataclass
class RawRead:
    frame: pd.DataFrame
    blank_lines: int
    bytes_read: int


def read_jsonl(path: Path, checkpoint_id: str, source_file: str | None = None) -> RawRead:
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
    frame = pd.DataFrame(
        {
            "checkpoint_id": checkpoint_id,
            "source_file": source_file,
            "line_number": pd.Series(numbers, dtype="int64"),
            "raw_line": pd.Series(texts, dtype="object"),
            "decode_error": pd.Series(errors, dtype="object"),
        },
        columns=RAW_COLUMNS,
    )
    return RawRead(frame, blank, size)
