"""`eval-pipeline`: run checkpoints, list them, query the warehouse read-only, backfill, serve the UI and the
viewer, rate. One module per command group (evaluate, warehouse, people, servers); ``app`` holds the parser and the
error handling every command shares.

Errors are one clear line on stderr with a non-zero exit code; `--debug` shows the traceback.
"""

from eval_pipeline.cli.app import entry, main

__all__ = ["entry", "main"]
