"""Deterministic per-sample metrics, registered by name and declared in the rubric YAML.

A metric function takes the checkpoint's sample records and its params and
returns columns (name -> one value per record), computed over a block of records
so it can be vectorised and share work between rows. A new rubric only needs a new
function here when it needs a metric that does not exist yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from eval_pipeline.core.params import NoParams, Params, typed
from eval_pipeline.core.registry import Registry
from eval_pipeline.core.types import Columns, Record, Value

MetricFn = Callable[[list[Record], Any], Columns]
METRICS: Registry[MetricFn] = Registry("metric function", __name__)
METRIC_BLOCK = 2048  # records each metric sees at once (core.text keeps the last TEXT_CACHE texts' words)


def metric(name: str, params: type[Params] = NoParams) -> Callable[[MetricFn], MetricFn]:
    """Register a metric function under ``name`` with its parameters' model (a new metric is one function and its
    ``Params`` in one module of this package); the function receives the validated ``params``."""

    def add(fn: MetricFn) -> MetricFn:
        unit = typed(params)(fn)
        METRICS.add(name, unit)
        return unit

    return add


def compute_metrics(specs: list[Any], records: list[Record]) -> pd.DataFrame:
    """All declared metrics for the records, one row per record (sample_id first). Every metric runs on a block
    of ``METRIC_BLOCK`` records before the next block starts, so a text the metrics share is tokenised once
    while it is still in ``core.text``'s cache (100k NPC samples: four tokenisations per response before)."""
    fns = [(spec.function, METRICS.get_unit(spec.function), dict(spec.params)) for spec in specs]
    columns: dict[str, list[Value]] = {"sample_id": [r["sample_id"] for r in records]}
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
    return sorted(METRICS)
