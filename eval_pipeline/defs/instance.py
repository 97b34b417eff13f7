"""The Dagster instance the project installs (`deploy/dagster.yaml`), fitted to the warehouse.

How many runs of one UI backfill go at once follows the warehouse: one on a DuckDB file (two runs' steps take
turns on the file step by step: 3.7x the sequential CLI), two on a DuckLake (one run's process starts while the
other works: 1.03x the CLI against 1.29x one at a time; bench/bench_ui_backfill.py). `make dagster-home` writes
the instance with ``python -m eval_pipeline.defs.instance <path>``; `eval-pipeline ui` names the setting when an
existing instance does not fit its warehouse; the benchmark writes the same instance.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from eval_pipeline.core import settings
from eval_pipeline.storage.registry import open_backend

DEPLOY_YAML = settings.REPO_ROOT / "deploy" / "dagster.yaml"
_BACKFILL_LIMIT = re.compile(r"(- key: dagster/backfill\n\s+limit: )\d+")


def backfill_runs_at_once(warehouse: str) -> int:
    """What the warehouse's backend declares (a DuckDB file: 1, one process at a time; a DuckLake: 2)."""
    return open_backend(warehouse, settings.warehouse_data_path()).runs_at_once


def instance_yaml(warehouse: str, backfill_limit: int | None = None) -> str:
    """`deploy/dagster.yaml` with the backfill limit for this warehouse (or ``backfill_limit``), comments kept."""
    limit = backfill_runs_at_once(warehouse) if backfill_limit is None else backfill_limit
    text, n = _BACKFILL_LIMIT.subn(rf"\g<1>{limit}", DEPLOY_YAML.read_text())
    if n != 1:
        raise ValueError(f"{DEPLOY_YAML} has no single 'key: dagster/backfill' limit to set")
    return text


def install(home: Path, warehouse: str) -> None:
    """The project's instance in ``home`` (``instance_yaml``), written when ``home`` has none; one it has is kept.
    Written whole or not at all (a second process never reads half a file)."""
    config = home / "dagster.yaml"
    if not config.exists():
        home.mkdir(parents=True, exist_ok=True)
        tmp = home / f".dagster.yaml.{os.getpid()}"
        tmp.write_text(instance_yaml(warehouse))
        os.replace(tmp, config)


def open_instance(home: Path, warehouse: str) -> Any:
    """The Dagster instance in ``home``, installed when it has none, its storages created by one process at a
    time: two first runs at once on an empty home otherwise both stamp the run database's schema, which is then
    left with two alembic heads and refuses every later run."""
    import fcntl

    import dagster as dg

    install(home, warehouse)
    with open(home / ".instance.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            instance = dg.DagsterInstance.from_config(str(home))
            instance.get_runs(limit=1)  # the run, event log and schedule databases exist when this returns
            instance.all_instigator_state()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return instance


def backfill_limit_hint(path: Path, warehouse: str) -> str | None:
    """What to change when the instance at ``path`` does not fit the warehouse; None when it does (or is absent)."""
    import yaml

    try:
        config = yaml.safe_load(path.read_text()) or {}
    except OSError:
        return None
    limits = ((config.get("concurrency") or {}).get("runs") or {}).get("tag_concurrency_limits") or []
    limit = next((x.get("limit") for x in limits if x.get("key") == "dagster/backfill"), None)
    want = backfill_runs_at_once(warehouse)
    if limit == want:
        return None
    return (
        f"{path} lets {limit or 'any number of'} run(s) of a backfill go at once; for this warehouse "
        f"set 'key: dagster/backfill' to 'limit: {want}' under concurrency.runs.tag_concurrency_limits "
        "(docs/design/scaling-history.md)"
    )


if __name__ == "__main__":  # python -m eval_pipeline.defs.instance <dagster.yaml to write> (for EVAL_WAREHOUSE)
    Path(sys.argv[1]).write_text(instance_yaml(settings.warehouse_path()))
