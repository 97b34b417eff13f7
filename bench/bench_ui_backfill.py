#!/usr/bin/env python3
"""A backfill of 4 checkpoints launched as the Dagster UI launches it (the webserver's GraphQL
`launchPartitionBackfill`, runs made and queued by the project's daemon, as `make ui` starts it) against the
same 4 checkpoints through `eval-pipeline backfill` (sequential, in one process), each on a fresh warehouse and
the instance `make dagster-home` installs for it. Goal (#13): the UI backfill takes at most 1.2x the CLI.

    python bench/bench_ui_backfill.py [--warehouse ducklake|file] [--timeout 900] [--intervals 2,5,30]
        [--backfill-limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CKPTS = ["ckpt-0100", "ckpt-0200", "ckpt-0300", "ckpt-0400"]


def checkpoints(tmp: Path) -> Path:
    root = tmp / "checkpoints"
    for c in CKPTS[:3]:
        shutil.copytree(ROOT / "data" / "checkpoints" / c, root / c)
    shutil.copytree(ROOT / "data" / "checkpoints" / "ckpt-0300", root / "ckpt-0400")
    (root / "ckpt-0400" / "checkpoint.json").write_text(
        json.dumps({"model": "lumen-7b-chat", "created_at": "2026-10-15T08:00:00Z", "parent": "ckpt-0300"})
    )
    return root


def environment(tmp: Path, backend: str, root: Path, backfill_limit: int | None = None) -> dict[str, str]:
    """The instance `make dagster-home` installs for this warehouse (``backfill_limit``: runs of one backfill
    at once, instead of the warehouse's own: 1 on a file, 2 on a lake)."""
    from eval_pipeline.runtime.instance import instance_yaml

    home = tmp / "home"
    home.mkdir()
    warehouse = str(tmp / "w.duckdb") if backend == "file" else f"ducklake:sqlite:{tmp / 'lake' / 'catalog.sqlite'}"
    (home / "dagster.yaml").write_text(instance_yaml(warehouse, backfill_limit))
    return dict(
        os.environ,
        DAGSTER_HOME=str(home),
        EVAL_WAREHOUSE=warehouse,
        EVAL_CHECKPOINT_DIR=str(root),
        EVAL_JUDGE="heuristic",
        EVAL_REPORT_DIR=str(tmp / "reports"),
        EVAL_WORKLIST_DIR=str(tmp / "wl"),
        DAGSTER_TELEMETRY_DISABLED="1",
    )


def cli(backend: str) -> float:
    tmp = Path(tempfile.mkdtemp(prefix="bench_cli_"))
    env = environment(tmp, backend, checkpoints(tmp))
    t = time.perf_counter()
    res = subprocess.run(
        [str(Path(sys.executable).with_name("eval-pipeline")), "backfill", "--no-fail-on-gates"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t
    assert res.returncode in (0, 4), res.stdout[-2000:] + res.stderr[-2000:]
    return wall


def _cpu_seconds(root_pids: list[int]) -> dict[str, float]:
    """CPU seconds (user + system) so far of the servers' processes and their living children, by command."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out: dict[str, float] = {}
    todo = list(root_pids)
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
        except OSError:
            continue
        name = next((w for w in ("webserver", "daemon", "grpc", "api") if w in cmd), cmd[:40])
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def ui(
    backend: str, timeout_s: float, interval: float | None = None, backfill_limit: int | None = None
) -> tuple[float, int, int]:
    import dagster as dg

    from eval_pipeline.devtools.net import free_port, launch_partition_backfill, wait_until_serving

    tmp = Path(tempfile.mkdtemp(prefix="bench_ui_"))
    env = environment(tmp, backend, checkpoints(tmp), backfill_limit)
    if interval is not None:
        env["EVAL_BACKFILL_INTERVAL_SECONDS"] = str(interval)
    bin_ = Path(sys.executable).parent
    ws = str(ROOT / "workspace.yaml")
    subprocess.run(
        [str(bin_ / "dagster"), "sensor", "stop", "checkpoint_sensor", "-w", ws],
        env=env,
        cwd=ROOT,
        capture_output=True,
        timeout=300,
    )  # the backfill alone launches runs
    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("checkpoints", CKPTS)
    port = free_port()
    logs = [open(tmp / "webserver.log", "w"), open(tmp / "daemon.log", "w")]  # noqa: SIM115 - the servers' logs
    web = subprocess.Popen(
        [str(bin_ / "dagster-webserver"), "-w", ws, "-p", str(port)],
        env=env,
        cwd=ROOT,
        stdout=logs[0],
        stderr=subprocess.STDOUT,
    )
    daemon = subprocess.Popen(
        [sys.executable, "-m", "eval_pipeline.runtime.daemon", "run", "-w", ws],  # as `make ui` starts it
        env=env,
        cwd=ROOT,
        stdout=logs[1],
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/server_info", web, timeout_s=120)
        from eval_pipeline.defs.build import build_definitions
        from eval_pipeline.rubrics import load_rubrics

        keys = [k for k in build_definitions().resolve_asset_graph().get_all_asset_keys()]
        assert load_rubrics()
        t, t_wall = time.perf_counter(), time.time()
        backfill_id = launch_partition_backfill(port, CKPTS, [list(k.path) for k in keys])
        while time.perf_counter() - t < timeout_s:
            bf = instance.get_backfill(backfill_id)
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
            if bf and bf.status.value != "REQUESTED" and all(r.is_finished for r in runs):
                break
            time.sleep(1.0)
        wall = time.perf_counter() - t
        records = sorted(
            instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id})),
            key=lambda r: r.create_timestamp,
        )
        ok = sum(r.dagster_run.status.value == "SUCCESS" for r in records)
        cpu = _cpu_seconds([daemon.pid, web.pid])
        print("  CPU seconds of the servers over the backfill: " + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()))
        runs_done = max((r.end_time or 0) - t_wall for r in records) if records else wall
        print(f"  runs done at {runs_done:.1f}s; the daemon marked the backfill finished at {wall:.1f}s")
        for r in records:  # where a run's time goes (seconds after the launch): made, started (its process up), ended
            print(
                f"  run {r.dagster_run.tags.get('dagster/partition', '?')}: "
                f"made at {r.create_timestamp.timestamp() - t_wall:.1f}s, "
                f"started {(r.start_time or 0) - t_wall:.1f}s, ended {(r.end_time or 0) - t_wall:.1f}s"
            )
        return wall, len(records), ok
    finally:
        for p in (daemon, web):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warehouse", choices=["ducklake", "file"], default="ducklake")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument(
        "--intervals",
        default="",
        help="comma-separated backfill-loop intervals (seconds) of the project's daemon to compare in this run "
        "(default: EVAL_BACKFILL_INTERVAL_SECONDS, else 2; Dagster's own daemon: 30)",
    )
    ap.add_argument(
        "--backfill-limit", type=int, help="runs of a backfill at once (default: what make dagster-home installs)"
    )
    args = ap.parse_args()
    c = cli(args.warehouse)
    for interval in [float(x) for x in args.intervals.split(",") if x.strip()] or [None]:
        u, n, ok = ui(args.warehouse, args.timeout, interval, args.backfill_limit)
        print(
            f"backfill of {len(CKPTS)} checkpoints x 5 rubrics on {args.warehouse}: "
            f"CLI (sequential, one process) {c:.1f}s; "
            f"UI (GraphQL launchPartitionBackfill, daemon, backfill loop every "
            f"{interval if interval is not None else 'default'} s, backfill runs at once: "
            f"{args.backfill_limit or 'as make dagster-home installs'}) {u:.1f}s in {n} runs "
            f"({ok} succeeded); "
            f"ratio {u / c:.2f}x (goal <= 1.2x)",
            flush=True,
        )


if __name__ == "__main__":
    main()
