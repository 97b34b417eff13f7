"""Helper for the reliability tests: materialize one checkpoint in a separate process.

python run_checkpoint.py WAREHOUSE CHECKPOINT_ROOT CHECKPOINT_ID [RUBRIC ...]
"""

import sys

import dagster as dg

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.runtime.runner import materialize_checkpoints

if __name__ == "__main__":
    warehouse, root, ckpt, *rubrics = sys.argv[1:]
    defs = build_definitions(None, warehouse, root)
    out = materialize_checkpoints(defs, dg.DagsterInstance.ephemeral(), [ckpt], set(rubrics) or None)
    print("RESULT", ckpt, all(o.success for o in out), flush=True)
    sys.exit(0 if out and all(o.success for o in out) else 1)
