"""eval_pipeline: declarative rubric evaluation of LLM checkpoints on Dagster and DuckDB."""

__version__ = "0.1.0"
