"""The Dagster instance the project installs (`deploy/dagster.yaml`), fitted to the warehouse.

How many runs of one UI backfill go at once follows the warehouse: one on a DuckDB file (two runs' steps take
turns on the file step by step: 3.7x the sequential CLI), two on a DuckLake (one run's process starts while the
other works: 1.03x the CLI against 1.29x one at a time; bench/bench_ui_backfill.py). `make dagster-home` writes
the instance with ``python -m eval_pipeline.runtime.instance <path>``; `eval-pipeline ui` names the setting when an
existing instance does not fit its warehouse; the benchmark writes the same instance.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.core import settings
from eval_pipeline.storage.registry import open_backend

DEPLOY_YAML = settings.REPO_ROOT / "deploy" / "dagster.yaml"


@dataclass(frozen=True)
class InstanceConfig:
    """The instance the project installs, as the fields it sets; ``render`` writes it as Dagster reads it, each
    section under the comment that says why. `deploy/dagster.yaml` is ``InstanceConfig().render()`` (a house test
    keeps the two equal), `make dagster-home` writes it with the backfill limit of the warehouse in use."""

    backfill_runs_at_once: int = 2
    dequeue_interval_seconds: int = 1
    run_monitoring_poll_seconds: int = 30

    def sections(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("", {"telemetry": {"enabled": False}}),
            (
                'The UI\'s first-run dialogs ("join the community") off: the machine may be offline.',
                {"nux": {"enabled": False}},
            ),
            (
                "Runs of one backfill launched from the UI at once: what the warehouse backend declares (a\n"
                "DuckLake: 2, one run's process starts while the other works; a DuckDB file: 1, it serves one\n"
                "process at a time).\n"
                "`make dagster-home` writes the number for EVAL_WAREHOUSE (docs/design/warehouse.md).",
                {
                    "concurrency": {
                        "runs": {
                            "tag_concurrency_limits": [{"key": "dagster/backfill", "limit": self.backfill_runs_at_once}]
                        }
                    }
                },
            ),
            (
                "Dagster's SQLite event log, keeping its connections open (Dagster's own class opens and closes the\n"
                "database file for every event a step stores and every question it asks: 27-28 s of a 52-57 s\n"
                "`make demo`, 8 s with this one). Same files, same schema: the webserver and the daemon read what the\n"
                "runs write as before.",
                {"event_log_storage": {"module": "eval_pipeline.runtime.event_log", "class": "EventLogStorage"}},
            ),
            (
                "The queue hands a run to its worker process within a second of the previous one finishing\n"
                "(Dagster's default looks every 5 s): a backfill's checkpoints run one after another.",
                {"run_queue": {"dequeue_interval_seconds": self.dequeue_interval_seconds}},
            ),
            (
                "Runs the daemon launched whose worker process died (SIGKILL, OOM) are marked failed; runs\n"
                "`eval-pipeline run` / `make demo` started in-process are reaped by the next such command\n"
                "(eval_pipeline/runtime/runner.py: reap_dead_runs).",
                {"run_monitoring": {"enabled": True, "poll_interval_seconds": self.run_monitoring_poll_seconds}},
            ),
        ]

    def data(self) -> dict[str, Any]:
        """The configuration as Dagster reads it."""
        out: dict[str, Any] = {}
        for _why, section in self.sections():
            out.update(section)
        return out

    def render(self) -> str:
        import yaml

        parts = [
            "# The Dagster instance for `make demo` / `make ui` (copied to $DAGSTER_HOME by `make dagster-home`).\n"
            "# Generated from eval_pipeline/runtime/instance.py (InstanceConfig): change it there.\n"
        ]
        for why, section in self.sections():
            comment = "".join(f"# {line}\n" for line in why.splitlines())
            parts.append(comment + yaml.safe_dump(section, sort_keys=False, default_flow_style=False))
        return "\n".join(parts)


def backfill_runs_at_once(warehouse: str | None = None) -> int:
    """Runs of one UI backfill at once, from what the warehouse's storage allows (``warehouse``; EVAL_WAREHOUSE's
    when not given): two where other processes may write meanwhile (a DuckLake: one run's process starts while the
    other works, docs/design/warehouse.md), one where a process holds the warehouse whole (a DuckDB file)."""
    spec = warehouse or settings.warehouse_path()
    return 2 if open_backend(spec, settings.warehouse_data_path()).concurrent_writers else 1


def instance_yaml(warehouse: str | None = None, backfill_limit: int | None = None) -> str:
    """The project's instance (``InstanceConfig``) with this warehouse's backfill limit (or ``backfill_limit``;
    the warehouse: EVAL_WAREHOUSE's when not given)."""
    limit = backfill_runs_at_once(warehouse) if backfill_limit is None else backfill_limit
    return InstanceConfig(backfill_runs_at_once=limit).render()


# the modules an instance file may name that moved out of defs/ into runtime/ (round 6): a home written before
# names the old paths, which no longer import
MOVED = ("event_log", "celery_launcher", "celery_app", "daemon", "instance", "dagster_private", "runner", "runs")


def migrated(text: str) -> str:
    """An instance file's text with the module paths that moved (``MOVED``) named where they are now."""
    for name in MOVED:
        text = text.replace(f"eval_pipeline.defs.{name}", f"eval_pipeline.runtime.{name}")
    return text


def install(home: Path, warehouse: str | None = None) -> None:
    """The project's instance in ``home`` (``instance_yaml``), written when ``home`` has none; one it has is kept,
    its module paths brought up to date (``migrated``). Written whole or not at all (a second process never reads
    half a file)."""
    config = home / "dagster.yaml"
    if config.exists():
        old = config.read_text()
        if migrated(old) == old:
            return
        text = migrated(old)
    else:
        text = instance_yaml(warehouse)
    home.mkdir(parents=True, exist_ok=True)
    tmp = home / f".dagster.yaml.{os.getpid()}"
    tmp.write_text(text)
    os.replace(tmp, config)


def open_instance(home: Path, warehouse: str | None = None) -> Any:
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


def backfill_limit_hint(path: Path, warehouse: str | None = None) -> str | None:
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


if __name__ == "__main__":  # python -m eval_pipeline.runtime.instance <dagster.yaml to write> (for EVAL_WAREHOUSE)
    if sys.argv[1:] == ["--reference"]:  # deploy/dagster.yaml, the defaults
        DEPLOY_YAML.write_text(InstanceConfig().render())
    else:
        Path(sys.argv[1]).write_text(instance_yaml())
