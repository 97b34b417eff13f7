"""Every setting the pipeline reads from the environment, read here and nowhere else.

Dagster resources take their defaults from these functions (so a run's config can
override them); the CLI and the report read them for the same defaults. Each
function reads the environment when called, so tests that set a variable see it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from eval_pipeline.core.judge_config import CALL_MODES as CALL_MODES  # re-exported: the judge's settings
from eval_pipeline.core.judge_config import JudgeConfig as JudgeConfig
from eval_pipeline.core.judge_config import judge_config as judge_config
from eval_pipeline.core.judge_config import typed_value

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT_MARKER = "rubric_configs"  # a folder holding it is a project folder


def _env(name: str, default: str) -> str:
    value = os.environ.get(name, "").strip()
    return value or default


def _int(name: str, default: str) -> int:
    """The variable as a whole number (``default`` when unset); a ValueError naming it otherwise."""
    return int(typed_value(name, _env(name, default), "int"))


def _float(name: str, default: str) -> float:
    """The variable as a number (``default`` when unset); a ValueError naming it otherwise."""
    return float(typed_value(name, _env(name, default), "float"))


class SettingError(ValueError):
    """A setting (an environment variable) that cannot be used as it is: a configuration error, said in one line."""


def project_root() -> Path:
    """EVAL_PROJECT_DIR, else the nearest folder at or above the working folder that holds ``rubric_configs/``,
    else the repository this package was installed from. Every relative path a setting names (the defaults
    included) is relative to it, so ``make X`` and ``.venv/bin/eval-pipeline X`` typed in any folder of the
    project open the same warehouse and read the same files."""
    named = os.environ.get("EVAL_PROJECT_DIR", "").strip()
    if named:
        folder = Path(named).expanduser().resolve()
        if not folder.is_dir():
            raise SettingError(
                f"EVAL_PROJECT_DIR names {folder}, which is not a folder: set it to the project's folder (the one "
                "holding rubric_configs/), or unset it"
            )
        return folder
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_MARKER).is_dir():
            return folder
    return REPO_ROOT


def in_project(path: str | Path) -> Path:
    """``path`` made absolute: a relative one is taken from the project folder (``project_root``)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else project_root() / p


DEFAULT_WAREHOUSE = "ducklake:sqlite:data/lake/catalog.sqlite"


def absolute_warehouse(spec: str) -> str:
    """A warehouse spec whose file paths (a SQLite catalog, a DuckDB file) are absolute, relative ones taken from
    the project folder; a PostgreSQL conninfo and ``:memory:`` are left as they are."""
    sqlite = "ducklake:sqlite:"
    if spec.startswith(sqlite):
        return sqlite + str(in_project(spec.removeprefix(sqlite)))
    if spec.startswith("ducklake:") or spec == ":memory:":
        return spec
    return str(in_project(spec))


def warehouse_path() -> str:
    """EVAL_WAREHOUSE: the warehouse: ducklake:sqlite:<catalog> (the default, under data/lake/),
    ducklake:postgres:<conninfo>, or a DuckDB file (a path ending .duckdb: one process at a time). A relative path
    is relative to the project folder (``project_root``)."""
    return absolute_warehouse(_env("EVAL_WAREHOUSE", DEFAULT_WAREHOUSE))


def warehouse_data_path() -> str | None:
    """EVAL_WAREHOUSE_DATA: where a DuckLake warehouse's Parquet files go (default: beside a SQLite catalog). A
    local relative path is relative to the project folder; a URL (``s3://...``) is kept as it is."""
    raw = os.environ.get("EVAL_WAREHOUSE_DATA", "").strip()
    if not raw or "://" in raw:
        return raw or None
    return str(in_project(raw)) + ("/" if raw.endswith("/") else "")


def lake_inline_rows() -> int:
    """EVAL_LAKE_INLINE_ROWS: DuckLake keeps the rows of an insert this small in its catalog instead of a Parquet
    file (DuckLake's own default is 10). 0, the default here: the demo and a leaderboard query are faster with it off
    (bench/bench_backends.py; docs/design/code-measurements.md)."""
    return _int("EVAL_LAKE_INLINE_ROWS", "0")


def duckdb_memory_limit() -> str:
    """EVAL_DUCKDB_MEMORY_LIMIT: DuckDB spills to disk past it."""
    return _env("EVAL_DUCKDB_MEMORY_LIMIT", "768MB")


def s3_timeout_seconds() -> int:
    """EVAL_S3_TIMEOUT: seconds an object store (``s3://``) has to answer one request before it is tried again (DuckDB's
    ``http_timeout``; its default, 30)."""
    value = _int("EVAL_S3_TIMEOUT", "30")
    if value < 1:
        raise ValueError(f"EVAL_S3_TIMEOUT must be a whole number of seconds >= 1, got {value}")
    return value


def s3_retries() -> int:
    """EVAL_S3_RETRIES: how many times a request to an object store that failed or timed out is tried again
    (DuckDB's ``http_retries``; its default, 3); then the statement, and the step, fail."""
    value = _int("EVAL_S3_RETRIES", "3")
    if value < 0:
        raise ValueError(f"EVAL_S3_RETRIES must be >= 0, got {value}")
    return value


REMOTE = "s3://"  # a folder setting may name an object-storage folder (storage.objects): machines share it


def is_remote(where: str | os.PathLike[str] | None) -> bool:
    """Whether a location names object storage (``s3://…``) rather than a local folder."""
    return str(where or "").startswith(REMOTE)


def location(name: str, default: str) -> str:
    """A folder setting as given: an ``s3://`` URL, else the folder made absolute (``in_project``)."""
    raw = _env(name, default)
    return raw.rstrip("/") if is_remote(raw) else str(in_project(raw))


def local_folder(where: str) -> Path:
    """Where a folder setting's files are on this machine: the folder itself, or for an ``s3://`` URL this
    machine's mirror of it under ``cache_dir()`` (filled by ``storage.objects.mirror`` before it is read)."""
    if not is_remote(where):
        return Path(where)
    import hashlib

    digest = hashlib.sha256(where.rstrip("/").encode()).hexdigest()[:16]
    return cache_dir() / "mirror" / digest


def checkpoint_location() -> str:
    """EVAL_CHECKPOINT_DIR: where checkpoint folders land (a folder, or ``s3://bucket/prefix``)."""
    return location("EVAL_CHECKPOINT_DIR", "data/checkpoints")


def checkpoint_dir() -> Path:
    """The checkpoint folders on this machine (``checkpoint_location``, or its mirror)."""
    return local_folder(checkpoint_location())


def import_dir() -> Path:
    """EVAL_IMPORT_DIR: where harnesses write the outputs the import sensor turns into checkpoints (default
    data/imports; one folder a harness's output, declared by its ``import.yaml``: ingest.importers.folder)."""
    return in_project(_env("EVAL_IMPORT_DIR", "data/imports"))


def rubric_dir() -> Path:
    """EVAL_RUBRIC_DIR: the rubric YAML files (default: rubric_configs/ in the repository)."""
    return in_project(_env("EVAL_RUBRIC_DIR", PROJECT_MARKER))


def ratings_location() -> str:
    """EVAL_RATINGS_DIR: human rating CSVs, one folder per rubric (a folder, or ``s3://bucket/prefix``)."""
    return location("EVAL_RATINGS_DIR", "data/human_ratings")


def ratings_dir() -> Path:
    """The rating files on this machine (``ratings_location``, or its mirror)."""
    return local_folder(ratings_location())


def worklist_location() -> str:
    """EVAL_WORKLIST_DIR: where worklist CSVs are written (a folder, or ``s3://bucket/prefix``)."""
    return location("EVAL_WORKLIST_DIR", "data/worklists")


def worklist_dir() -> Path:
    """Where worklist CSVs are written on this machine (``worklist_location``, or the folder uploaded from)."""
    return local_folder(worklist_location())


def view_url() -> str:
    """EVAL_VIEW_URL: where `eval-pipeline view` serves (the Dagster UI links asset metadata to its pages)."""
    return _env("EVAL_VIEW_URL", "http://127.0.0.1:8765").rstrip("/")


def report_dir() -> Path:
    """EVAL_REPORT_DIR: where report.html is written."""
    return in_project(_env("EVAL_REPORT_DIR", "reports"))


def cache_dir() -> Path:
    """EVAL_CACHE_DIR: derived data kept between processes (parsed dictionaries); safe to delete."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(_env("EVAL_CACHE_DIR", str(base / "eval_pipeline")))


def ingest_chunk_lines() -> int:
    """EVAL_INGEST_CHUNK_LINES: lines judged per range (bounds memory; raw files are read in blocks). Two of
    DuckDB's row groups (122,880 rows each), so both cores measure each range; pandera's Polars backend costs
    the same a range whatever its size."""
    return _int("EVAL_INGEST_CHUNK_LINES", "245760")


def executor_kind() -> str:
    """EVAL_EXECUTOR: 'in_process' or 'multiprocess'."""
    return _env("EVAL_EXECUTOR", "in_process").lower()


def max_concurrent_steps() -> int:
    """EVAL_MAX_CONCURRENT: steps at once under the multiprocess executor (0: Dagster's default)."""
    return _int("EVAL_MAX_CONCURRENT", "0")


def backfill_chunk() -> int:
    """EVAL_BACKFILL_CHUNK: the most checkpoints one run evaluates (Dagster's backfill policy of every partitioned
    asset; `eval-pipeline run`/`backfill` and a UI backfill run ⌈N / chunk⌉ runs for N checkpoints). 50 by default:
    a run of 50 checkpoints × 5 rubrics of the sample's size holds about 1 GB at its peak (docs/scaling.md); a run's
    fixed cost (~2 s of Dagster's own work) is then 4 % of the run."""
    value = _int("EVAL_BACKFILL_CHUNK", "50")
    if value < 1:
        raise ValueError(f"EVAL_BACKFILL_CHUNK must be >= 1, got {value}")
    return value


# the step log's settings (core/progress.py): an audit follows every process, so a clean environment keeps them
STEP_LOG_SETTINGS = ("EVAL_STEP_LOG", "EVAL_STEP_CONTEXT")


def without_settings(env: Mapping[str, str], prefixes: tuple[str, ...] = ("EVAL_", "DAGSTER_")) -> dict[str, str]:
    """``env`` without the variables named with ``prefixes`` (by default the project's and Dagster's settings: a
    fresh project's or profile's start), keeping the step log's (``STEP_LOG_SETTINGS``)."""
    return {k: v for k, v in env.items() if not k.startswith(prefixes) or k in STEP_LOG_SETTINGS}


def sensor_interval_seconds(default: float) -> int:
    """EVAL_SENSOR_INTERVAL_SECONDS: how often the daemon evaluates each of the project's sensors (the checkpoint,
    ratings, judge-batch, automation and report sensors: each builder asks it); unset, each keeps its own
    ``default`` (10-60 s). A deployment
    that wants a landing noticed sooner, or a test that waits on the daemon, sets it; at least 1."""
    raw = os.environ.get("EVAL_SENSOR_INTERVAL_SECONDS", "").strip()
    if not raw:
        return max(1, round(default))
    value = _float("EVAL_SENSOR_INTERVAL_SECONDS", raw)
    if value < 1:
        raise ValueError(f"EVAL_SENSOR_INTERVAL_SECONDS must be >= 1, got {raw}")
    return round(value)


def backfill_interval_seconds() -> float:
    """EVAL_BACKFILL_INTERVAL_SECONDS: how often the project's daemon (eval_pipeline/runtime/daemon.py) looks at
    backfills launched from the UI (Dagster's own daemon: every 30 s)."""
    value = _float("EVAL_BACKFILL_INTERVAL_SECONDS", "2")
    if value <= 0:
        raise ValueError(f"EVAL_BACKFILL_INTERVAL_SECONDS must be > 0, got {value}")
    return value


def daemon_reload_seconds() -> float:
    """EVAL_DAEMON_RELOAD_SECONDS: how often the project's daemon (eval_pipeline/runtime/daemon.py) starts its code
    server again to pick up changed code and rubrics (Dagster's own daemon: every 60 s). Each start builds the
    definitions anew, about 5 CPU-seconds: every 60 s that was most of what an idle deployment burns. Runs always
    load the code as it is on disk when they start; only the sensors and the automation read the daemon's copy."""
    value = _float("EVAL_DAEMON_RELOAD_SECONDS", "300")
    if value < 10:
        raise ValueError(f"EVAL_DAEMON_RELOAD_SECONDS must be >= 10, got {value}")
    return value


def dagster_url() -> str | None:
    """EVAL_DAGSTER_URL: the Dagster webserver of a deployment whose runs execute on its workers (the distributed
    profile): `eval-pipeline run` submits its runs there instead of running them in its own process."""
    return os.environ.get("EVAL_DAGSTER_URL", "").strip().rstrip("/") or None


def dagster_home() -> Path:
    """DAGSTER_HOME, set to the project's .dagster_home when unset (the CLI's persistent instance); a relative
    one is taken from the project folder, as Dagster itself needs an absolute path."""
    home = in_project(os.environ.get("DAGSTER_HOME", "").strip() or ".dagster_home")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def wait_for_run_s() -> float:
    """EVAL_WAIT_FOR_RUN: how long `run` / `backfill` wait for another run evaluating a selected checkpoint before
    saying its verdict could not be learnt (seconds; default 1800)."""
    value = _float("EVAL_WAIT_FOR_RUN", "1800")
    if not value >= 0:
        raise SettingError(f"EVAL_WAIT_FOR_RUN {value!r} must be a number of seconds >= 0")
    return value


def openai_base_url() -> str | None:
    """OPENAI_BASE_URL: the OpenAI-compatible endpoint (None: the client's default)."""
    return os.environ.get("OPENAI_BASE_URL") or None


def openai_api_key() -> str:
    """OPENAI_API_KEY: read when a client is made, never stored or logged."""
    return os.environ.get("OPENAI_API_KEY", "")


def prices_path() -> str | None:
    """EVAL_PRICES: a YAML price table (model -> input/output price per 1M tokens); unset: no costs in money."""
    return os.environ.get("EVAL_PRICES", "").strip() or None


def judge_budget() -> float | None:
    """EVAL_JUDGE_BUDGET: what one run may spend on the judge, in the price table's currency (unset: no limit)."""
    raw = os.environ.get("EVAL_JUDGE_BUDGET", "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"EVAL_JUDGE_BUDGET {raw!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"EVAL_JUDGE_BUDGET {raw!r} must be a finite number >= 0")
    return value
