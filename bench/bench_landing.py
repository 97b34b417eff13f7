#!/usr/bin/env python3
"""What landing a checkpoint costs as the history grows, and what a backfill costs per checkpoint (#70).

Checkpoints of a history made from the sample data (eval_pipeline.devtools.history: copies of the three sample
checkpoints, each the parent of the next, ratings on every other one) land one at a time, each with the command a
user types (`eval-pipeline run --checkpoint C`, a fresh process, as the checkpoint sensor's runs are); per landing:
wall time, the command's CPU seconds (user + system of the process and its children: the machine is shared, so CPU is
the figure), the Dagster runs it made and the warehouse's commits (a DuckLake's snapshots). Then a backfill: N
checkpoints in one command, its CPU per checkpoint against a single landing's, and its runs.

The figures are ratios against baselines measured in the same run: landing k against landing 1 (the median of the
first ``--window`` landings of the same kind, rated or not, against the last ``--window``), and the backfill's
cost per checkpoint against one landing's.

    python bench/bench_landing.py [--landings 50] [--backfill 200] [--rubric kg_qa ...] [--backend lake|file]

Goals (issue #70): landing k = 50 ≤ 1.25× landing 1 in CPU and ≤ 3 runs per rubric; the backfill's checkpoint
≤ 0.3× a landing, in ≤ 25 runs for 200 checkpoints × 5 rubrics.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eval_pipeline.devtools.history import checkpoint_id, write_checkpoint, write_ratings  # noqa: E402

EXE = str(Path(sys.executable).with_name("eval-pipeline"))


class Place:
    """One history's folders, warehouse and Dagster instance."""

    def __init__(self, base: Path, backend: str) -> None:
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        (base / "dagster").mkdir(exist_ok=True)
        self.catalog = base / "lake" / "catalog.sqlite"
        warehouse = f"ducklake:sqlite:{self.catalog}" if backend == "lake" else str(base / "warehouse.duckdb")
        self.env = {
            **os.environ,
            "EVAL_CHECKPOINT_DIR": str(base / "checkpoints"),
            "EVAL_RATINGS_DIR": str(base / "ratings"),
            "EVAL_WAREHOUSE": warehouse,
            "DAGSTER_HOME": str(base / "dagster"),
            "EVAL_REPORT_DIR": str(base / "reports"),
            "EVAL_WORKLIST_DIR": str(base / "worklists"),
        }
        self.backend = backend

    def runs(self) -> int:
        db = self.base / "dagster" / "history" / "runs.db"
        if not db.exists():
            return 0
        with sqlite3.connect(db) as con:
            return int(con.execute("SELECT count(*) FROM runs").fetchone()[0])

    def commits(self) -> int | None:
        if self.backend != "lake":
            return None
        if not self.catalog.exists():
            return 0  # no commit yet
        with sqlite3.connect(self.catalog) as con:
            return int(con.execute("SELECT count(*) FROM ducklake_snapshot").fetchone()[0])

    def command(self, args: list[str]) -> dict[str, float]:
        """Run ``eval-pipeline <args>``: its wall and CPU seconds, the runs and commits it made."""
        runs, commits = self.runs(), self.commits()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run([EXE, *args], env=self.env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in (0, 3):
            raise SystemExit(f"eval-pipeline {' '.join(args[:4])}… exited {done.returncode}: {done.stderr[-400:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        end_commits = self.commits()
        return {
            "wall": wall,
            "cpu": cpu,
            "runs": self.runs() - runs,
            "commits": (end_commits - commits) if end_commits is not None and commits is not None else -1,
        }


def land(place: Place, n: int, rubrics: list[str]) -> list[dict[str, float]]:
    """Checkpoints 1 … n landed one at a time; the figures of each landing."""
    out = []
    flags = [a for r in rubrics for a in ("--rubric", r)]
    for i in range(1, n + 1):
        write_checkpoint(place.base / "checkpoints", i, rubrics)
        rated = i % 2 == 0
        if rated:
            write_ratings(place.base / "ratings", i, rubrics)
        fig = place.command(["run", "--checkpoint", checkpoint_id(i), "--no-fail-on-gates", *flags])
        fig.update(k=i, rated=rated)
        out.append(fig)
        print(
            f"  landing {i:>3} {'rated ' if rated else 'unrated'}: wall {fig['wall']:6.1f} s  cpu {fig['cpu']:6.1f} s  "
            f"runs {fig['runs']:>3}  commits {fig['commits']:>4}",
            flush=True,
        )
    return out


def backfill(place: Place, n: int, rubrics: list[str]) -> dict[str, float]:
    """n checkpoints written, then evaluated by one `eval-pipeline run` of all of them."""
    for i in range(1, n + 1):
        write_checkpoint(place.base / "checkpoints", i, rubrics)
        if i % 2 == 0:
            write_ratings(place.base / "ratings", i, rubrics)
    flags = [a for r in rubrics for a in ("--rubric", r)]
    return place.command(["run", "--no-fail-on-gates", *flags])


def _machine_cpu() -> float:
    """The machine's CPU seconds so far (user + system of every process, /proc/stat): the processes of a deployment
    (webserver, daemon, its code server, the runs it launched) are not all reaped by this one, so their CPU is read
    for the whole machine — run this bench with nothing else running."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system = (int(x) for x in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def ui_backfill(place: Place, n: int, rubrics: list[str]) -> dict[str, float]:
    """n checkpoints written and registered, then one partition backfill of every checkpoint over the rubrics'
    evaluation assets, launched through the webserver's GraphQL as the UI launches it and run by the project's
    daemon (the instance of ``deploy/dagster.yaml``; the checkpoint sensor stopped, so the backfill alone launches
    the runs), until the backfill is done and the deployment has settled (``defs.automation.settling``: the
    decisions' runs after it included). CPU: the machine's, from the servers' start to the end (``_machine_cpu``)."""
    import dagster as dg

    from eval_pipeline.defs.asset import evaluation
    from eval_pipeline.defs.automation import settling
    from eval_pipeline.defs.build import build_definitions
    from eval_pipeline.defs.partitions import CHECKPOINTS_PARTITION
    from eval_pipeline.devtools.net import free_port, launch_partition_backfill, wait_until_serving

    keys = []
    for i in range(1, n + 1):
        write_checkpoint(place.base / "checkpoints", i, rubrics)
        keys.append(checkpoint_id(i))
        if i % 2 == 0:
            write_ratings(place.base / "ratings", i, rubrics)
    home = place.base / "dagster"
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    env = dict(place.env)  # the sensors' intervals a deployment has by default
    bin_ = Path(sys.executable).parent
    ws = str(ROOT / "workspace.yaml")
    stop = [str(bin_ / "dagster"), "sensor", "stop", "checkpoint_sensor", "-w", ws]
    subprocess.run(stop, env=env, cwd=ROOT, capture_output=True, timeout=300, check=True)
    os.environ["DAGSTER_HOME"] = str(home)
    graph = build_definitions(ROOT / "rubric_configs", place.env["EVAL_WAREHOUSE"], str(place.base / "checkpoints"))
    selected = evaluation(rubrics).resolve(graph.resolve_asset_graph())
    before = _machine_cpu()
    t0 = time.perf_counter()
    port = free_port()
    with open(place.base / "webserver.log", "w") as wlog, open(place.base / "daemon.log", "w") as dlog:
        web = subprocess.Popen(
            [str(bin_ / "dagster-webserver"), "-w", ws, "-p", str(port)],
            env=env,
            cwd=ROOT,
            stdout=wlog,
            stderr=subprocess.STDOUT,
        )
        daemon = subprocess.Popen(
            [sys.executable, "-m", "eval_pipeline.runtime.daemon", "run", "-w", ws],
            env=env,
            cwd=ROOT,
            stdout=dlog,
            stderr=subprocess.STDOUT,
        )
        try:
            with dg.DagsterInstance.get() as instance:
                instance.add_dynamic_partitions(CHECKPOINTS_PARTITION, keys)
                wait_until_serving(f"http://127.0.0.1:{port}/server_info", web, timeout_s=180)
                backfill_id = launch_partition_backfill(port, keys, [list(k.path) for k in sorted(selected)])
                going = {"REQUESTED", "CANCELING", "FAILING"}
                while instance.get_backfill(backfill_id).status.value in going or not settling(instance).settled:
                    if daemon.poll() is not None:
                        raise SystemExit(f"the daemon exited {daemon.returncode}: {place.base / 'daemon.log'}")
                    time.sleep(2)
                status = instance.get_backfill(backfill_id).status.value
        finally:
            for proc in (daemon, web):
                proc.terminate()
            for proc in (daemon, web):
                proc.wait(timeout=120)
    wall = time.perf_counter() - t0
    cpu = _machine_cpu() - before
    if status != "COMPLETED_SUCCESS":
        raise SystemExit(f"the backfill ended {status}: {place.base / 'daemon.log'}")
    commits = place.commits()
    return {"wall": wall, "cpu": cpu, "runs": place.runs(), "commits": -1 if commits is None else commits}


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows) if rows else float("nan")


def summary(landings: list[dict[str, float]], window: int, rubrics: int) -> dict[str, float]:
    """Landing k against landing 1, rated and unrated apart: medians of the first and the last ``window``."""
    out: dict[str, float] = {}
    for rated in (False, True):
        kind = [r for r in landings if r["rated"] == rated]
        first, last = kind[:window], kind[-window:]
        tag = "rated" if rated else "unrated"
        out[f"cpu_first_{tag}"] = _median(first, "cpu")
        out[f"cpu_last_{tag}"] = _median(last, "cpu")
        out[f"ratio_{tag}"] = out[f"cpu_last_{tag}"] / out[f"cpu_first_{tag}"]
        out[f"runs_last_{tag}"] = max((r["runs"] for r in last), default=0) / rubrics
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--landings", type=int, default=50)
    ap.add_argument("--backfill", type=int, default=200, help="checkpoints of the one-command backfill (0: none)")
    ap.add_argument("--rubric", action="append", help="default: kg_qa, then all five")
    ap.add_argument("--backend", action="append", choices=["lake", "file"], help="default: both")
    ap.add_argument(
        "--via",
        choices=["cli", "ui"],
        default="cli",
        help="the backfill by one command, or by a UI/GraphQL partition backfill run by the daemon",
    )
    ap.add_argument("--window", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="keep the histories under this folder")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    sets = [args.rubric] if args.rubric else [["kg_qa"], None]
    everything = sorted(p.stem for p in (ROOT / "rubric_configs").glob("*.yaml"))
    results: dict[str, object] = {}
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench_landing_"))
    try:
        for backend in args.backend or ["lake", "file"] if args.landings else []:  # --landings 0: the backfill only
            for rubrics in sets:
                names = rubrics or everything
                label = f"{backend}/{'+'.join(names) if len(names) < 5 else 'all five'}"
                print(f"{label}: {args.landings} landings one at a time", flush=True)
                landings = land(Place(base / label.replace("/", "_").replace(" ", "_"), backend), args.landings, names)
                s = summary(landings, args.window, len(names))
                results[label] = {"landings": landings, "summary": s}
                print(
                    f"{label}: landing {args.landings} / landing 1 CPU: unrated {s['ratio_unrated']:.2f}x "
                    f"({s['cpu_last_unrated']:.1f} / {s['cpu_first_unrated']:.1f} s), rated {s['ratio_rated']:.2f}x "
                    f"({s['cpu_last_rated']:.1f} / {s['cpu_first_rated']:.1f} s) [goal <= 1.25x]; runs per rubric at "
                    f"the end: {s['runs_last_unrated']:.1f} unrated, {s['runs_last_rated']:.1f} rated [goal <= 3]",
                    flush=True,
                )
        if args.backfill:
            for backend in args.backend or ["lake", "file"]:
                names = args.rubric or everything
                label = f"{backend}/backfill {args.backfill} x {len(names)}" + (" (ui)" if args.via == "ui" else "")
                print(f"{label}: {'one command' if args.via == 'cli' else 'a UI/GraphQL backfill'}", flush=True)
                one = land(Place(base / f"single_{backend}", backend), 1, names)[0]
                how = backfill if args.via == "cli" else ui_backfill
                fig = how(Place(base / f"backfill_{backend}", backend), args.backfill, names)
                per = fig["cpu"] / args.backfill
                results[label] = {"backfill": fig, "single_landing": one, "per_checkpoint_ratio": per / one["cpu"]}
                print(
                    f"{label}: wall {fig['wall'] / 60:.1f} min, cpu {fig['cpu'] / 60:.1f} min, {fig['runs']} runs "
                    f"[goal <= 25 for 200 x 5]; a checkpoint {per:.2f} s of CPU = {per / one['cpu']:.3f}x a single "
                    f"landing's {one['cpu']:.1f} s [goal <= 0.3x]",
                    flush=True,
                )
    finally:
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
