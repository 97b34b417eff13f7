"""What each viewer page reads: one function per page, each querying only what that page shows.

Every read opens its own short connection (``Warehouse.session``): on a DuckDB file the viewer never keeps
the file from a run's writers between requests, and on a DuckLake each request reads the latest snapshot.
Rubric and checkpoint names are checked identifiers before they reach SQL; everything else is a parameter.
"""

from __future__ import annotations

from eval_pipeline.publish.viewer.queries.checkpoint import CheckpointPage, checkpoint_page, checkpoint_table
from eval_pipeline.publish.viewer.queries.common import (
    leaderboard,
    metric_columns,
    parse_json_cell,
    rank,
    records,
    score_names,
    score_names_of,
)
from eval_pipeline.publish.viewer.queries.sample import SamplePage, sample_page
from eval_pipeline.publish.viewer.queries.samples import FILTERS, PAGE_SIZE, SampleQuery, SamplesPage, samples_page

__all__ = [
    "FILTERS",
    "PAGE_SIZE",
    "CheckpointPage",
    "SamplePage",
    "SampleQuery",
    "SamplesPage",
    "checkpoint_page",
    "checkpoint_table",
    "leaderboard",
    "metric_columns",
    "parse_json_cell",
    "rank",
    "records",
    "sample_page",
    "samples_page",
    "score_names",
    "score_names_of",
]
