"""Reading raw model outputs (JSONL) in blocks, keeping every line.

Each non-blank line becomes one row with its number and text; a line that is not valid UTF-8 is kept (with the
bad bytes escaped) and flagged, so validation can quarantine it with its reason. A byte-order mark on the first
line is dropped; a line ends at ``\\n`` and loses its trailing ``\\r``s. Blank lines (ASCII whitespace only) are
counted but are not rows.

The file is read in blocks of about 16 MB: NumPy finds the line ends and Arrow makes one string array of each
block without a Python object per line (the bytes are used as they are when the block is valid UTF-8, which
Arrow checks in C++). Only a block holding bytes that are not UTF-8 is split line by line in Python.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from eval_pipeline.core.contracts import RAW_COLUMNS
from eval_pipeline.storage.tables import COMPRESSION

BOM = b"\xef\xbb\xbf"
ASCII_WHITESPACE = " \t\n\r\x0b\x0c"  # what bytes.strip() removes: a blank line has nothing else
BLOCK_BYTES = 16 << 20


class Hash(Protocol):
    def update(self, data: Any, /) -> None: ...


@dataclass
class RawRead:
    table: pa.Table
    blank_lines: int
    bytes_read: int

    @property
    def frame(self) -> pd.DataFrame:
        df = self.table.to_pandas()
        df["line_number"] = df["line_number"].astype("int64")
        return df[RAW_COLUMNS]


def _lines_of_block(block: bytes | memoryview) -> tuple[pa.Array, pa.Array, int]:
    """A block of whole lines (each ending in \\n) as (texts, decode errors, line count)."""
    ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    n = len(ends)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:] = ends + 1
    texts = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(block))
    try:
        texts.validate(full=True)  # UTF-8, in C++
        errors = pa.nulls(n, pa.string())
    except pa.ArrowInvalid:
        return _lines_in_python(block, n)
    return pc.utf8_rtrim(texts, characters="\r\n").cast(pa.string()), errors, n


def _lines_in_python(block: bytes | memoryview, n: int) -> tuple[pa.Array, pa.Array, int]:
    texts: list[str] = []
    errors: list[str | None] = []
    for raw in bytes(block).split(b"\n")[:n]:
        line = raw.rstrip(b"\r\n")
        try:
            texts.append(line.decode("utf-8"))
            errors.append(None)
        except UnicodeDecodeError as exc:
            texts.append(line.decode("utf-8", errors="backslashreplace"))
            errors.append(f"not valid UTF-8 (byte {exc.start}: {exc.reason})")
    return pa.array(texts, pa.string()), pa.array(errors, pa.string()), n


def _table(checkpoint_id: str, source_file: str, first: int, block: bytes | memoryview, bytes_read: int) -> RawRead:
    """A block of whole lines (each ending in \\n), numbered from ``first``, without its blank lines."""
    texts, errors, n = _lines_of_block(block)
    blank = pc.equal(pc.utf8_length(pc.utf8_trim(texts, characters=ASCII_WHITESPACE)), 0)
    table = pa.table(
        {
            "checkpoint_id": pa.repeat(pa.scalar(checkpoint_id, pa.string()), n),
            "source_file": pa.repeat(pa.scalar(source_file, pa.string()), n),
            "line_number": pa.array(np.arange(first, first + n, dtype=np.int64)),
            "raw_line": texts,
            "decode_error": errors,
        }
    ).filter(pc.invert(blank))
    return RawRead(table, n - table.num_rows, bytes_read)


def iter_jsonl(
    path: Path, checkpoint_id: str, source_file: str | None = None, digest: Hash | None = None
) -> Iterator[RawRead]:
    """The file in Arrow tables of whole blocks (at most about 16 MB of text each), so memory stays bounded.
    ``digest`` (a hashlib object) is updated with every byte of the file as it is read, so a caller that wants
    the file's hash does not read it twice. Each block is read into a buffer of its own that its table's text
    uses as it is (no copy of the block); only the partial line after its last line end is copied forward."""
    source_file = source_file or path.name
    first = 1
    tail = b""
    pending = 0  # bytes read since the last table was yielded
    at_start = True
    with open(path, "rb") as fh:
        while True:
            # no larger than what is left of the file (a fresh buffer is zeroed, which a small file need not pay for);
            # a file that grows meanwhile is read on in the next block
            left = max(os.fstat(fh.fileno()).st_size - fh.tell(), 1)
            buf = bytearray(len(tail) + min(BLOCK_BYTES, left))
            buf[: len(tail)] = tail
            got = fh.readinto(memoryview(buf)[len(tail) :])
            if not got:
                break
            if digest is not None:
                digest.update(memoryview(buf)[len(tail) : len(tail) + got])
            pending += got
            end = len(tail) + got
            start = len(BOM) if at_start and buf.startswith(BOM) else 0
            at_start = False
            cut = buf.rfind(b"\n", start, end) + 1
            if cut == 0:
                tail = bytes(buf[start:end])  # one line longer than a block: read on
                continue
            tail = bytes(buf[cut:end])
            read = _table(checkpoint_id, source_file, first, memoryview(buf)[start:cut], pending)
            pending = 0
            first += read.table.num_rows + read.blank_lines
            yield read
    if tail:
        yield _table(checkpoint_id, source_file, first, tail + b"\n", pending)
    elif pending:
        yield RawRead(_empty(), 0, pending)


# raw_line is stored with zstd where the warehouse file allows it (tables.COMPRESSION): faster, a tenth of the
# disk and a lower peak than DuckDB's default (FSST) on the ingest benchmark (docs/design/code-measurements.md)
RAW_SCHEMA = pa.schema(
    [
        ("checkpoint_id", pa.string()),
        ("source_file", pa.string()),
        ("line_number", pa.int64()),
        pa.field("raw_line", pa.string(), metadata={COMPRESSION: b"zstd"}),
        ("decode_error", pa.string()),
    ]
)


def _empty() -> pa.Table:
    return RAW_SCHEMA.empty_table()


def read_jsonl(path: Path, checkpoint_id: str, source_file: str | None = None) -> RawRead:
    """The whole file as one table (small files and tests)."""
    parts = list(iter_jsonl(path, checkpoint_id, source_file=source_file))
    if not parts:
        return RawRead(_empty(), 0, 0)
    return RawRead(
        pa.concat_tables([p.table for p in parts]),
        sum(p.blank_lines for p in parts),
        sum(p.bytes_read for p in parts),
    )
