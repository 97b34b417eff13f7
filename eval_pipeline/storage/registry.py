"""The one place a warehouse backend is chosen from ``EVAL_WAREHOUSE``: a prefix, a factory."""

from __future__ import annotations

from collections.abc import Callable

from eval_pipeline.storage.backend import BackendError, WarehouseBackend
from eval_pipeline.storage.file import FileBackend
from eval_pipeline.storage.lake import lake_backend


def _file(spec: str, data_path: str | None, lock_timeout_s: float | None) -> WarehouseBackend:
    return FileBackend(spec) if lock_timeout_s is None else FileBackend(spec, lock_timeout_s)


def _lake(spec: str, data_path: str | None, lock_timeout_s: float | None) -> WarehouseBackend:
    return lake_backend(spec, data_path)  # a lake holds no lock anyone waits on


# (prefix of EVAL_WAREHOUSE, factory(spec, data path, how long to wait for a lock)); the first whose prefix
# matches wins, the file takes the rest
BACKENDS: tuple[tuple[str, Callable[[str, str | None, float | None], WarehouseBackend]], ...] = (
    ("ducklake:", _lake),
    ("", _file),
)


def open_backend(spec: str, data_path: str | None = None, lock_timeout_s: float | None = None) -> WarehouseBackend:
    """The backend ``spec`` names (nothing is opened yet)."""
    for prefix, factory in BACKENDS:
        if spec.startswith(prefix):
            return factory(spec, data_path, lock_timeout_s)
    raise BackendError(f"EVAL_WAREHOUSE {spec!r} names no warehouse backend")
