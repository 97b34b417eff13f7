"""The one place a warehouse backend is chosen from ``EVAL_WAREHOUSE``: backends are a ``Registry[T]`` like every
other unit, each a module of ``storage.backends`` that registers a name, a prefix of the spec and a factory
(``@backend(name, prefix=...)``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eval_pipeline.core.registry import Registry
from eval_pipeline.storage.backend import BackendError, WarehouseBackend

Factory = Callable[[str, str | None, float | None], WarehouseBackend]


@dataclass(frozen=True)
class BackendKind:
    """A spec starting with ``prefix`` is opened by ``factory(spec, data path, how long to wait for a lock)``."""

    prefix: str
    factory: Factory


BACKENDS: Registry[BackendKind] = Registry("warehouse backend", "eval_pipeline.storage.backends")


def backend(name: str, prefix: str) -> Callable[[Factory], Factory]:
    """Decorator: the decorated factory opens every ``EVAL_WAREHOUSE`` spec that starts with ``prefix`` (the empty
    prefix: whatever no other backend claims), registered as the warehouse backend ``name``."""

    def add(factory: Factory) -> Factory:
        BACKENDS.add(name, BackendKind(prefix, factory))
        return factory

    return add


def open_backend(spec: str, data_path: str | None = None, lock_timeout_s: float | None = None) -> WarehouseBackend:
    """The backend ``spec`` names, the longest matching prefix winning (nothing is opened yet)."""
    for kind in sorted(BACKENDS.values(), key=lambda k: -len(k.prefix)):
        if spec.startswith(kind.prefix):
            return kind.factory(spec, data_path, lock_timeout_s)
    raise BackendError(f"EVAL_WAREHOUSE {spec!r} names no warehouse backend")
