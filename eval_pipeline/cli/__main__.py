"""`python -m eval_pipeline.cli`: the `eval-pipeline` command."""

from eval_pipeline.cli.app import entry

entry()
