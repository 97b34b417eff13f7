"""eval_pipeline: declarative rubric evaluation of LLM checkpoints on Dagster and DuckDB."""

import os

__version__ = "0.1.0"

# Polars' allocator (its own jemalloc) gives freed pages back to the system at once instead of keeping them for
# a while: ingest checks ranges of ~250k lines one after another while DuckDB, with an allocator of its own,
# measures the next, and pages Polars kept were pages DuckDB could not have (a lower peak, the same time:
# docs/design/code-measurements.md). Read once, when Polars loads: set before any module of the package imports
# it. A value the environment already has is left as it is.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
