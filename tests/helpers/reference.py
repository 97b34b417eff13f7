"""One evaluated lake for the whole suite: the three sample checkpoints × five rubrics, evaluated once by
`eval-pipeline run` on the default embedded profile in a project folder of its own, kept in a cache keyed by the
content of the code, the rubrics, the sample data and the ratings (``content_key``), so a session, or the next one
on an unchanged tree, evaluates it at most once. Safe under xdist: the first worker to ask builds it under a file
lock, the others wait for it and read it.

Tests that compare against "what one machine's `eval-pipeline run` makes" read ``reference_tables()`` (its tables
as ``tests.helpers.lakes.contents`` gives them) instead of evaluating the flow again; the paths themselves (the
CLI, the UI backfill, the daemon, the cluster, `make demo`) are each still proved end to end once, by their own
tests. ``EVAL_TEST_LAKE_CACHE`` moves the cache (default ``~/.cache/eval_pipeline/test-lakes``)."""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from eval_pipeline.core.locks import file_lock
from eval_pipeline.core.settings import without_settings

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("eval-pipeline"))
# what the evaluation's result depends on: the package, the rubrics, the checkpoints and ratings it reads
KEYED = ("eval_pipeline", "rubric_configs", "data/checkpoints", "data/human_ratings", "pyproject.toml")
KEEP = 3  # lakes of other contents kept (another branch's, the last edit's), the oldest removed first


def content_key() -> str:
    """A digest of every file the evaluation depends on (path and bytes; caches and byte code left out)."""
    digest = hashlib.sha256()
    for top in KEYED:
        base = ROOT / top
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            digest.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get("EVAL_TEST_LAKE_CACHE") or Path.home() / ".cache" / "eval_pipeline" / "test-lakes")


def clean_env(project: Path) -> dict[str, str]:
    """The environment a person's shell gives `eval-pipeline` in ``project``: no EVAL_ or DAGSTER_ setting of the
    suite's own, the project's folder as its home."""
    env = without_settings(os.environ)
    env.update(DAGSTER_HOME=str(project / "dagster_home"), EVAL_PROJECT_DIR=str(project))
    return env


def _build(project: Path) -> None:
    from eval_pipeline.storage.warehouse import Warehouse
    from tests.helpers.lakes import contents

    for part in ("rubric_configs", "data/checkpoints", "data/human_ratings"):
        shutil.copytree(ROOT / part, project / part)
    env = clean_env(project)
    if env.get("EVAL_STEP_LOG"):
        env["EVAL_STEP_CONTEXT"] = "tests/helpers/reference.py"  # the suite's shared lake, whoever asked first
    done = subprocess.run([CLI, "run", "--no-fail-on-gates"], cwd=project, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the reference evaluation failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
    (project / "output.txt").write_text(done.stdout)
    saved = os.environ.pop("EVAL_WAREHOUSE_DATA", None)
    try:
        tables = contents(Warehouse(f"ducklake:sqlite:{project}/data/lake/catalog.sqlite"))
    finally:
        if saved is not None:
            os.environ["EVAL_WAREHOUSE_DATA"] = saved
    staged = project / "contents.pkl.part"
    with staged.open("wb") as f:
        pickle.dump(tables, f)
    staged.replace(project / "contents.pkl")  # last: the mark of a whole lake


def evaluated_project() -> Path:
    """The project folder holding the evaluated lake (``data/lake``), the command's output (``output.txt``) and
    its tables (``contents.pkl``); evaluated now when no cache holds this content. Read it, never write to it."""
    root = cache_root()
    key = content_key()
    project = root / key
    if (project / "contents.pkl").is_file():
        return project
    with file_lock(root / f"{key}.lock"):
        if (project / "contents.pkl").is_file():  # built by the worker we waited for
            return project
        # built where it is read (the lake's catalog names its data folder); complete once contents.pkl is there
        shutil.rmtree(project, ignore_errors=True)
        project.mkdir(parents=True)
        _build(project)
        _forget_old(root, keep=key)
    return project


def _forget_old(root: Path, keep: str) -> None:
    others = sorted(
        (p for p in root.iterdir() if p.is_dir() and p.name != keep),
        key=lambda p: p.stat().st_mtime,
    )
    for old in others[: max(0, len(others) - (KEEP - 1))]:
        shutil.rmtree(old, ignore_errors=True)
        (root / f"{old.name}.lock").unlink(missing_ok=True)


@functools.cache
def reference_tables() -> dict[str, pd.DataFrame]:
    """The reference lake's tables (``contents``: lasting columns, canonical row order), read once per process.
    Callers get the same frames: copy before changing one."""
    with (evaluated_project() / "contents.pkl").open("rb") as f:
        tables: dict[str, pd.DataFrame] = pickle.load(f)
    return tables
