"""Files written whole or not at all: each through a temporary file renamed into place and synced, with the folder
synced after, the mode the process's umask gives."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def umask() -> int:
    """The process's umask, read without changing it (Linux's /proc; elsewhere set and set back)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """``data`` as ``path``, all or nothing, on disk when this returns (temporary file, fsync, rename, fsync), with
    ``mode`` or, without one, the permissions a file made by ``open`` gets (0666 less the umask: a temporary
    file is made 0600, which the ratings files of a shared folder must not be)."""
    atomic_writes({path: data}, mode)


def atomic_writes(files: dict[Path, bytes | None], mode: int | None = None) -> None:
    """Each ``files`` path as its bytes (None: removed), all staged (written and synced as temporary files) before
    any is renamed into place: one that cannot be staged leaves every file as it was."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, data in files.items():
            if data is None:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((tmp, path))
            os.fchmod(fd, mode if mode is not None else 0o666 & ~umask())
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise
    for path, data in files.items():
        if data is None:
            path.unlink(missing_ok=True)
    for folder in {p.parent for p in files}:
        _fsync_dir(folder)
