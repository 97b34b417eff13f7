"""Deterministic per-sample metrics, registered by name and declared in the rubric YAML.

A metric function takes the checkpoint's sample records and its params and
returns columns (name -> one value per record), computed over a block of records
so it can be vectorised and share work between rows. A new rubric only needs a new
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
METRIC_BLOCK = 2048  # records each metric sees at once (core.text keeps the last TEXT_CACHE texts' words)


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
    """All declared metrics for the records, one row per record (sample_id first). Every metric runs on a block
    of ``METRIC_BLOCK`` records before the next block starts, so a text the metrics share is tokenised once
    while it is still in ``core.text``'s cache (100k NPC samples: four tokenisations per response before)."""
    _load_all()
    fns = []
    for spec in specs:
        fn = METRICS.get(spec.function)
        if fn is None:
            raise KeyError(f"unknown metric function {spec.function!r} (known: {sorted(METRICS)})")
        fns.append((spec.function, fn, dict(spec.params)))
    columns: dict[str, list[Any]] = {"sample_id": [r["sample_id"] for r in records]}
    for start in range(0, max(len(records), 1), METRIC_BLOCK):
        block = records[start : start + METRIC_BLOCK]
        for function, fn, params in fns:
            for name, values in fn(block, params).items():
                if len(values) != len(block):
                    raise ValueError(
                        f"metric {function!r} returned {len(values)} values for column {name!r}, expected {len(block)}"
                    )
                columns.setdefault(name, []).extend(values)
    return pd.DataFrame(columns)


def known_metrics() -> list[str]:
    _load_all()
    return sorted(METRICS)
