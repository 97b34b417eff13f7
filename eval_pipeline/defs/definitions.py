"""The Dagster code location (workspace.yaml; `dagster definitions validate`, the webserver, the daemon and every
run it launches load it): the definitions built from the environment when this module is imported
(``eval_pipeline.defs.build``)."""

from eval_pipeline.defs.build import build_definitions

defs = build_definitions()
