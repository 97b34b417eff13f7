"""What `make install` leaves: every process of the project (a command, a Dagster step, a worker, a test's
subprocess) imports dagster, pandas and the rest from byte-code.

Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine and CI), Python never writes a module's compiled form, so
an install that did not compile it makes every process compile ~20,000 files' worth of what it imports from
source: `import dagster, pandas` took 3.3 s instead of 1.4 s (stop 14; uv installs without byte-code unless told).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

import pytest

HEAVY = ("dagster", "pandas", "pandera", "openai", "duckdb", "numpy", "pydantic")  # the fixed dependencies and ours


def _uncompiled(module_name: str) -> list[str]:
    """The package's own .py files (top level of the package) with no byte-code beside them for this Python."""
    module = importlib.import_module(module_name)
    folder = Path(module.__file__ or "").parent
    missing = []
    for source in sorted(folder.glob("*.py")):
        if not Path(importlib.util.cache_from_source(str(source))).is_file():
            missing.append(source.name)
    return missing


@pytest.mark.skipif(not Path(sys.prefix, "pyvenv.cfg").is_file(), reason="not in the project's .venv")
def test_the_installed_dependencies_are_byte_compiled():
    """Checked where it matters (``PYTHONDONTWRITEBYTECODE`` set: nothing fills the cache later) and everywhere
    else alike, since the install must not depend on the environment it ran in."""
    uncompiled = {name: missing for name in HEAVY if (missing := _uncompiled(name))}
    assert not uncompiled, (
        f"installed without byte-code (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}):"
        f" { ({name: f'{len(files)} files, {files[0]} …' for name, files in uncompiled.items()}) };"
        " `make install` compiles the .venv once (its stamp .venv/.compiled)"
    )
