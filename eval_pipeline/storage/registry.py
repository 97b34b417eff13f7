"""The one place a warehouse backend is chosen from ``EVAL_WAREHOUSE``: a prefix, a factory."""

from __future__ import annotations

from collections.abc import Callable

from eval_pipeline.storage.backend import BackendError, WarehouseBackend
from eval_pipeline.storage.file import FileBackend
from eval_pipeline.storage.lake import lake_backend


def _file(spec: str, data_path: str | None) -> WarehouseBackend:
    return FileBackend(spec)


# (prefix of EVAL_WAREHOUSE, factory); the first whose prefix matches wins, the file takes the rest
BACKENDS: tuple[tuple[str, Callable[[str, str | None], WarehouseBackend]], ...] = (
    ("ducklake:", lake_backend),
    ("", _file),
)


def open_backend(spec: str, data_path: str | None = None) -> WarehouseBackend:
    """The backend ``spec`` names (nothing is opened yet)."""
    for prefix, factory in BACKENDS:
        if spec.startswith(prefix):
            return factory(spec, data_path)
    raise BackendError(f"EVAL_WAREHOUSE {spec!r} names no warehouse backend")
