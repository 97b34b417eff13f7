"""The one place a warehouse backend is chosen from ``EVAL_WAREHOUSE``: backends are a ``Registry[T]`` like every
other unit, each a prefix of the spec and a factory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eval_pipeline.core.registry import Registry
from eval_pipeline.storage.backend import BackendError, WarehouseBackend
from eval_pipeline.storage.file import FileBackend
from eval_pipeline.storage.lake import lake_backend


@dataclass(frozen=True)
class BackendKind:
    """A spec starting with ``prefix`` is opened by ``factory(spec, data path, how long to wait for a lock)``."""

    prefix: str
    factory: Callable[[str, str | None, float | None], WarehouseBackend]


BACKENDS: Registry[BackendKind] = Registry("warehouse backend")


def _file(spec: str, data_path: str | None, lock_timeout_s: float | None) -> WarehouseBackend:
    return FileBackend(spec) if lock_timeout_s is None else FileBackend(spec, lock_timeout_s)


def _lake(spec: str, data_path: str | None, lock_timeout_s: float | None) -> WarehouseBackend:
    return lake_backend(spec, data_path)  # a lake holds no lock anyone waits on


BACKENDS.add("ducklake", BackendKind("ducklake:", _lake))
BACKENDS.add("file", BackendKind("", _file))  # the empty prefix: whatever no other backend claims


def open_backend(spec: str, data_path: str | None = None, lock_timeout_s: float | None = None) -> WarehouseBackend:
    """The backend ``spec`` names, the longest matching prefix winning (nothing is opened yet)."""
    for kind in sorted(BACKENDS.values(), key=lambda k: -len(k.prefix)):
        if spec.startswith(kind.prefix):
            return kind.factory(spec, data_path, lock_timeout_s)
    raise BackendError(f"EVAL_WAREHOUSE {spec!r} names no warehouse backend")
