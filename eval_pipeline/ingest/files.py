"""Files named like inputs that must not be read as such: a directory, a FIFO (reading would block), a device (a
link to /dev/zero never ends), a dangling link. Checkpoint manifests, their rubric files and rating files are all
checked here before they are opened."""

from __future__ import annotations

import stat
from pathlib import Path


def not_a_file(path: Path) -> str | None:
    """Why ``path`` is not a regular file to read, or None when it is one (links followed)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "a dangling link" if path.is_symlink() else "missing"
    if stat.S_ISDIR(mode):
        return "a directory"
    if not stat.S_ISREG(mode):
        return "not a regular file (a FIFO or a device)"
    return None
