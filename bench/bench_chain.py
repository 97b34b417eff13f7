#!/usr/bin/env python3
"""The whole chain at scale: per rubric, a parent checkpoint and a child of N samples each (built from the
sample data's lines, bad lines included, ids made unique), human ratings on R of the child's samples, the
offline judge. The parent is evaluated first (one run); then every asset of the child, in dependency order,
runs in a process of its own, so each asset's wall time and peak RSS are its own. Prints a table per
rubric, the total of the non-judge assets against the goal, and the RSS of a process that only loads the
code location (every step's floor).

    python bench/bench_chain.py [--samples 100000] [--ratings 1000] [--rubric kg_qa ...]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JUDGE_ASSETS = {"judge_scores", "judge_repeatability", "judge_calibration", "extractions"}
GOAL_S, GOAL_MB = 30.0, 1536


def _lines(rubric: str, ckpt: str) -> list[str]:
    return (ROOT / "data/checkpoints" / ckpt / f"{rubric}.jsonl").read_text(encoding="utf-8").splitlines()


def write_checkpoint(root: Path, ckpt: str, parent: str | None, rubric: str, id_field: str, source: str, n: int):
    """``n`` lines cycling over the source checkpoint's lines; each copy's ids get a suffix (``-r<k>``), so
    repeats inside one copy stay repeats and bad lines stay bad."""
    folder = root / ckpt
    folder.mkdir(parents=True, exist_ok=True)
    base = _lines(rubric, source)
    written, k = 0, 0
    with open(folder / f"{rubric}.jsonl", "w", encoding="utf-8") as fh:
        while written < n:
            for line in base:
                if written == n:
                    break
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    d = None
                if isinstance(d, dict) and isinstance(d.get(id_field), str):
                    line = json.dumps({**d, id_field: f"{d[id_field]}-r{k}"})
                fh.write(line + "\n")
                written += 1
            k += 1
    manifest = {"model": "bench", "created_at": f"2026-11-0{1 if parent is None else 2}T00:00:00Z", "parent": parent}
    (folder / "checkpoint.json").write_text(json.dumps(manifest))


def write_ratings(root: Path, rubric: str, id_field: str, ckpt: str, source: str, n_samples: int) -> int:
    """Ratings for ``n_samples`` of the checkpoint's samples: the source checkpoint's rating rows, copied
    onto the same suffixed ids the checkpoint has."""
    rows = list(csv.DictReader((ROOT / "data/human_ratings" / rubric / f"{source}.csv").open(encoding="utf-8")))
    per_copy = len({r[id_field] for r in rows})
    out, k = [], 0
    while len({r[id_field] for r in out}) < n_samples:
        out += [{**r, id_field: f"{r[id_field]}-r{k}", "checkpoint": ckpt} for r in rows]
        k += 1
        if k * per_copy > 10 * n_samples:
            break
    ids = list(dict.fromkeys(r[id_field] for r in out))[:n_samples]
    keep = set(ids)
    out = [r for r in out if r[id_field] in keep]
    (root / rubric).mkdir(parents=True, exist_ok=True)
    with open(root / rubric / f"{ckpt}.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(out)
    return len(out)


def run_step(env: dict[str, str], *args: str) -> tuple[float, float, dict]:
    """One child process: its own wall time (printed by it), its peak RSS (from wait4) and what it said."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", *args], env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    said = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    if proc.returncode != 0 or not said.get("success", False):
        raise SystemExit(f"step {args} failed (exit {proc.returncode}): {said}")
    return said.get("seconds", 0.0), usage.ru_maxrss / 1024, said


def child(args: list[str]) -> None:
    """In the child: materialize one asset (with its checks) of one partition, or a whole group, or nothing."""
    import dagster as dg

    from eval_pipeline.defs.build import build_definitions
    from eval_pipeline.runtime.runner import materialize_checkpoints
    from eval_pipeline.runtime.runs import register_checkpoints

    what, rubric, ckpt = args[0], args[1], args[2]
    defs = build_definitions()
    instance = dg.DagsterInstance.get()
    if what == "nothing":
        print(json.dumps({"success": True, "seconds": 0.0}))
        return
    t0 = time.perf_counter()
    if what == "group":
        (outcome,) = materialize_checkpoints(defs, instance, [ckpt], rubrics={rubric}, log_level="ERROR")
        ok = outcome.success
    else:
        register_checkpoints(instance, [ckpt])
        assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
        res = dg.materialize(
            [*assets, *(defs.asset_checks or [])],
            instance=instance,
            partition_key=ckpt,
            resources=defs.resources,
            selection=dg.AssetSelection.assets(dg.AssetKey([rubric, what])),
            raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": "ERROR"}}}},
        )
        ok = res.success
    print(json.dumps({"success": ok, "seconds": time.perf_counter() - t0}))


def order(rubric: str) -> list[str]:
    """The rubric's assets in dependency order."""
    import dagster as dg

    from eval_pipeline.defs.build import build_definitions

    defs = build_definitions()
    deps: dict[str, set[str]] = {}
    for a in defs.assets or []:
        if not isinstance(a, dg.AssetsDefinition):
            continue
        for key in a.keys:
            if key.path[0] == rubric:
                deps[key.path[-1]] = {d.path[-1] for d in a.asset_deps[key] if d.path[0] == rubric}
    out: list[str] = []
    while len(out) < len(deps):
        ready = sorted(k for k, d in deps.items() if k not in out and d <= set(out))
        out += ready
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--ratings", type=int, default=1000, help="samples of the child with human ratings")
    ap.add_argument("--rubric", action="append", help="default: every rubric")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from eval_pipeline.rubrics import load_rubrics

    rubrics = [r for r in load_rubrics() if not args.rubric or r.name in args.rubric]
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        (tmpd / "home").mkdir()
        (tmpd / "home" / "dagster.yaml").write_text((ROOT / "deploy/dagster.yaml").read_text())
        env = {
            **os.environ,
            "DAGSTER_HOME": str(tmpd / "home"),
            "EVAL_WAREHOUSE": str(tmpd / "w.duckdb"),
            "EVAL_CHECKPOINT_DIR": str(tmpd / "ckpts"),
            "EVAL_RATINGS_DIR": str(tmpd / "ratings"),
            "EVAL_WORKLIST_DIR": str(tmpd / "worklists"),
            "EVAL_REPORT_DIR": str(tmpd / "reports"),
            "EVAL_JUDGE": "heuristic",
        }
        t = time.perf_counter()
        for r in rubrics:
            idf = r.inputs.id_field
            write_checkpoint(tmpd / "ckpts", "big-parent", None, r.name, idf, "ckpt-0100", args.samples)
            write_checkpoint(tmpd / "ckpts", "big-child", "big-parent", r.name, idf, "ckpt-0200", args.samples)
            write_ratings(tmpd / "ratings", r.name, idf, "big-child", "ckpt-0200", args.ratings)
        took = time.perf_counter() - t
        print(f"wrote {len(rubrics)} rubric(s) x 2 checkpoints of {args.samples} lines in {took:.0f}s")
        _, floor_mb, _ = run_step(env, "nothing", "-", "-")
        print(f"a process that loads the code location and nothing else: peak RSS {floor_mb:.0f} MB")
        for r in rubrics:
            parent_s, parent_mb, _ = run_step(env, "group", r.name, "big-parent")
            print(f"\n== {r.name}: parent evaluated (every asset, one run) in {parent_s:.1f}s, peak {parent_mb:.0f} MB")
            total = 0.0
            worst_mb = 0.0
            print(f"{'asset':24s} {'seconds':>8s} {'peak MB':>8s}")
            for asset in order(r.name):
                secs, mb, _ = run_step(env, asset, r.name, "big-child")
                judge = asset in JUDGE_ASSETS
                if not judge:
                    total += secs
                    worst_mb = max(worst_mb, mb)
                print(f"{asset:24s} {secs:8.1f} {mb:8.0f}{'  (judge)' if judge else ''}", flush=True)
            print(
                f"non-judge assets: {total:.1f}s in total (goal <= {GOAL_S:.0f}s: {total / GOAL_S:.2f}x), "
                f"largest peak RSS {worst_mb:.0f} MB (goal <= {GOAL_MB} MB: {worst_mb / GOAL_MB:.2f}x)"
            )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n(this driver process: peak RSS {peak:.0f} MB)")


if __name__ == "__main__":
    main()
