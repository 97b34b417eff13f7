"""Deterministic per-sample metrics, registered by name and declared in the rubric YAML.

A metric function takes the checkpoint's sample records and its params and
returns columns (name -> one value per record), computed over the whole batch so
it can be vectorised and share work between rows. A new rubric only needs a new
function here when it needs a metric that does not exist yet.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

import pandas as pd

MetricFn = Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, list[Any]]]
METRICS: dict[str, MetricFn] = {}


def metric(name: str) -> Callable[[MetricFn], MetricFn]:
    def register(fn: MetricFn) -> MetricFn:
        METRICS[name] = fn
        return fn

    return register


def _load_all() -> None:
    """Importing this package's modules registers their metrics: a new metric is one function in one module."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def compute_metrics(specs: list, records: list[dict[str, Any]]) -> pd.DataFrame:
    """All declared metrics for the records, one row per record (sample_id first)."""
    _load_all()
    out = pd.DataFrame({"sample_id": [r["sample_id"] for r in records]})
    for spec in specs:
        fn = METRICS.get(spec.function)
        if fn is None:
            raise KeyError(f"unknown metric function {spec.function!r} (known: {sorted(METRICS)})")
        cols = fn(records, dict(spec.params))
        for name, values in cols.items():
            if len(values) != len(records):
                raise ValueError(
                    f"metric {spec.function!r} returned {len(values)} values for column {name!r}, expected "
                    f"{len(records)}"
                )
            out[name] = values
    return out


def known_metrics() -> list[str]:
    _load_all()
    return sorted(METRICS)
