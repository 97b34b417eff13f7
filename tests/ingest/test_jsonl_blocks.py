"""Reading a JSONL file in blocks: whatever the block size, the lines, their numbers and their decode errors are
those of reading the file line by line, and the digest is the file's sha256."""

import hashlib
import random

import pytest

from eval_pipeline.ingest import jsonl


def _reference(data: bytes) -> tuple[list[tuple[int, str, bool]], int]:
    """Line by line in plain Python: (number, text, not UTF-8) of each non-blank line, and the blank count."""
    if data.startswith(jsonl.BOM):
        data = data[len(jsonl.BOM) :]
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    rows, blank = [], 0
    for number, raw in enumerate(parts, start=1):
        line = raw.rstrip(b"\r\n")
        if not line.strip():
            blank += 1
            continue
        try:
            rows.append((number, line.decode("utf-8"), False))
        except UnicodeDecodeError:
            rows.append((number, line.decode("utf-8", errors="backslashreplace"), True))
    return rows, blank


def _random_file(rng: random.Random) -> bytes:
    pieces = [jsonl.BOM] if rng.random() < 0.5 else []
    for i in range(rng.randint(0, 60)):
        kind = rng.random()
        if kind < 0.1:
            pieces.append(b"  \t\n")  # blank
        elif kind < 0.15:
            pieces.append(b'{"x": "caf\xe9"}\n')  # not UTF-8
        elif kind < 0.25:
            pieces.append(b'{"long": "' + b"y" * rng.randint(50, 300) + b'"}\r\n')  # longer than a block, CRLF
        else:
            pieces.append(f'{{"i": {i}, "t": "é{"z" * rng.randint(0, 20)}"}}\n'.encode())
    data = b"".join(pieces)
    return data[:-1] if data and rng.random() < 0.3 else data  # sometimes no final line end


@pytest.mark.parametrize("seed", range(40))
def test_blocks_read_as_the_file_line_by_line(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", rng.choice([16, 37, 64, 1 << 20]))
    data = _random_file(rng)
    path = tmp_path / "x.jsonl"
    path.write_bytes(data)
    digest = hashlib.sha256()
    parts = list(jsonl.iter_jsonl(path, "ck", digest=digest))
    got = [
        (n, text, err is not None)
        for p in parts
        for n, text, err in zip(
            p.table["line_number"].to_pylist(), p.table["raw_line"].to_pylist(), p.table["decode_error"].to_pylist()
        )
    ]
    rows, blank = _reference(data)
    assert got == rows
    assert sum(p.blank_lines for p in parts) == blank
    assert sum(p.bytes_read for p in parts) == len(data)
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
