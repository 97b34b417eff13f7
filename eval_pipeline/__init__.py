"""eval_pipeline: declarative rubric evaluation of LLM checkpoints on Dagster and DuckDB."""

import os

__version__ = "0.1.0"

# Polars' allocator (its own jemalloc) gives freed pages back to the system at once instead of keeping them for
# ~10 s: ingest checks ranges of ~250k lines one after another while DuckDB, with an allocator of its own,
# measures the next, and pages Polars kept were pages DuckDB could not have (1M lines: peak RSS 1.05-1.09 GB ->
# 0.995 GB, the same time). Read once, when Polars loads: set before any module of the package imports it. A value
# the environment already has is left as it is.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
