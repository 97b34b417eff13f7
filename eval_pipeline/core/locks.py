"""A lock file held with ``flock``: one process at a time across a machine (builds into a shared cache, say)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold ``path`` (created with its folder when missing) exclusively for the ``with`` block; waits for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def file_lock_or_skip(path: Path) -> Iterator[bool]:
    """Hold ``path`` exclusively for the ``with`` block if no other process holds it (True), without waiting; False
    when another does, or when ``path`` cannot be opened (nothing to share a turn with: the block runs alone)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = path.open("a")
    except OSError:
        yield True
        return
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
