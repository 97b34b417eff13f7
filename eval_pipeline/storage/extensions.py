"""DuckDB's extensions as the pipeline loads them: from their PyPI packages (``duckdb-extension-<name>``, pinned to
the duckdb version), LOADed by path: never INSTALLed, never downloaded."""

from __future__ import annotations

import glob
import importlib
import os

# the extension's name -> its file's (and package's) name
PACKAGES = {"ducklake": "ducklake", "sqlite": "sqlite_scanner", "postgres": "postgres_scanner", "httpfs": "httpfs"}
# an extension only an optional profile needs: the install that brings it
OPTIONAL = {"httpfs": "s3:// locations need the httpfs extension: pip install 'eval_pipeline[distributed]'"}


def extension_file(name: str) -> str:
    """The extension's file inside its PyPI package."""
    package = PACKAGES[name]
    try:
        module = importlib.import_module(f"duckdb_extension_{package}")
    except ImportError:
        if name in OPTIONAL:
            raise RuntimeError(OPTIONAL[name]) from None
        raise
    found = glob.glob(
        os.path.join(os.path.dirname(module.__file__ or ""), "extensions", "*", f"{package}.duckdb_extension")
    )
    if not found:
        raise RuntimeError(f"the {package} extension file is missing from duckdb-extension-{package.replace('_', '-')}")
    return found[0]
