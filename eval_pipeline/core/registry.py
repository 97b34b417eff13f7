"""One way to register a unit: ``Registry[T]``, a read-only mapping of names to units of one kind.

Metrics, gate kinds, heuristic features and derived-score kinds are each a registry. A unit is a function or
class in a module of the registry's package, decorated ``@REGISTRY.register("name")``; the package's modules are
imported the first time the registry is read, so adding a unit is adding one module (or one function in one).
A name registered twice is an error naming both; an unknown name is a ``KeyError`` listing the known ones.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")
U = TypeVar("U")


class Registry(Mapping[str, T], Generic[T]):
    """Units of one ``kind`` (for messages), registered from the modules of ``package`` (loaded on first read;
    ``skip``: modules that hold no units, e.g. a shared base)."""

    def __init__(self, kind: str, package: str | None = None, skip: tuple[str, ...] = ()):
        self.kind, self.package, self.skip = kind, package, skip
        self._units: dict[str, T] = {}
        self._loaded = package is None
        self._loading = False

    def register(self, name: str) -> Callable[[U], U]:
        """Decorator: register the decorated unit under ``name``."""

        def add(unit: U) -> U:
            self.add(name, unit)  # type: ignore[arg-type]
            return unit

        return add

    def add(self, name: str, unit: T) -> None:
        if name in self._units:
            raise ValueError(f"{self.kind} {name!r} registered twice ({self._units[name]!r} and {unit!r})")
        self._units[name] = unit

    def load(self) -> Registry[T]:
        """Import every module of the package once (their decorators register the units)."""
        if self._loaded or self._loading:
            return self
        self._loading = True
        try:
            module = importlib.import_module(self.package or "")
            for info in pkgutil.iter_modules(module.__path__):
                if info.name not in self.skip:
                    importlib.import_module(f"{self.package}.{info.name}")
            self._loaded = True
        finally:
            self._loading = False
        return self

    def get_unit(self, name: str) -> T:
        """The unit named ``name``; a KeyError listing the known ones otherwise."""
        self.load()
        try:
            return self._units[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} {name!r} (known: {', '.join(sorted(self._units))})") from None

    def __getitem__(self, name: str) -> T:
        return self.get_unit(name)

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(self._units)

    def __len__(self) -> int:
        self.load()
        return len(self._units)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._units

    def __delitem__(self, name: str) -> None:
        """Unregister (for a test that registered a unit of its own)."""
        del self._units[name]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._units)})"
