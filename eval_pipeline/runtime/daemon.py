"""`dagster-daemon run` with a backfill loop that looks every few seconds instead of every 30.

Dagster 1.13's backfill daemon sleeps a fixed ``DEFAULT_DAEMON_INTERVAL_SECONDS`` (30 s, no instance setting
changes it) between iterations: a backfill launched from the UI waits up to 30 s for its first runs and up to
30 s more before it is marked finished; for 4 checkpoints that was ~50 s of a ~90 s job (bench/bench_ui_backfill.py).
This entrypoint sets that interval (EVAL_BACKFILL_INTERVAL_SECONDS, default 2) and then runs Dagster's own daemon
CLI unchanged. The constant is read once, when each daemon's loop starts; besides the backfill loop only the
asset daemon reads it (as its interval when ``auto_materialize.minimum_interval_seconds`` is unset), and the
project's automation sensor sets its own interval. It also sets how often the daemon starts its code server again
to pick up changed code (EVAL_DAEMON_RELOAD_SECONDS, default 300; Dagster's ``RELOAD_WORKSPACE_INTERVAL``, 60 s):
each start builds the definitions anew, and at 60 s that was 9 of the 14 CPU-seconds an idle daemon spent a minute.
`make ui` and `eval-pipeline ui` start it next to the webserver; in a deployment, run ``python -m
eval_pipeline.runtime.daemon run`` where ``dagster-daemon run`` ran.
"""

from __future__ import annotations

import sys

from eval_pipeline.core import settings
from eval_pipeline.runtime.dagster_private import daemon_cli, daemon_controller


def set_backfill_interval() -> float:
    """Set the daemons' loop interval (the backfill loop's sleep) in this process from the setting; returns it."""
    value = settings.backfill_interval_seconds()
    daemon_controller.DEFAULT_DAEMON_INTERVAL_SECONDS = value  # type: ignore[assignment]  # an int in Dagster; a float sleeps as well
    return value


def set_reload_interval() -> float:
    """Set how often the daemon starts its code server again (Dagster: every 60 s) from the setting; returns it."""
    value = settings.daemon_reload_seconds()
    daemon_controller.RELOAD_WORKSPACE_INTERVAL = value  # type: ignore[assignment]  # an int in Dagster; compared with a float
    return value


def main() -> None:
    dagster_daemon = daemon_cli()
    set_backfill_interval()
    set_reload_interval()
    sys.argv[0] = "dagster-daemon"  # the arguments are dagster-daemon's: run -w workspace.yaml ...
    dagster_daemon()


if __name__ == "__main__":
    main()
