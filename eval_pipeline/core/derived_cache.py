"""Data derived from installed files (a parsed dictionary, a corpus's indexes) kept between processes: parsing
them again costs every new process (each run the daemon launches is one) far more than reading the result back.

A cache file is named after what it came from (each source file's name, size and modification time, and the
versions given), so a changed source gets a new file and is never read stale. Its content is marshal: plain
dicts, lists, sets, strings and numbers, nothing in it runs code. It is written whole and then renamed, so a
process reading it never sees half a file; a folder that cannot be written means parsing again next time.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def cache_file(folder: Path, prefix: str, sources: Iterable[Path], *versions: str) -> Path:
    """``<folder>/<prefix>.<digest>.marshal``, the digest of the versions and of every source's name, size and
    modification time."""
    stamp = ",".join(f"{p.name}:{s.st_size}:{s.st_mtime_ns}" for p in sources for s in [p.stat()])
    digest = hashlib.sha256(f"{';'.join(versions)};{stamp}".encode()).hexdigest()[:16]
    return folder / f"{prefix}.{digest}.marshal"


def read(path: Path) -> Any | None:
    """What ``write`` kept at ``path``; None when there is no such file or it cannot be read back."""
    try:
        return marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None


def write(path: Path, value: Any) -> None:
    """Keep ``value`` at ``path`` (whole, then renamed); nothing when the folder cannot be written."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(marshal.dumps(value))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
