"""Warehouse backends: one module each, registering itself with ``storage.registry.backend`` (a name and the prefix
of ``EVAL_WAREHOUSE`` it opens). ``file`` (a DuckDB file) and ``lake`` (a DuckLake on a SQLite or PostgreSQL catalog);
adding one is adding a module here (docs/extending.md)."""
