"""What was submitted to a provider's Batch API, in the warehouse: ``main.judge_batches`` (one row per submission:
the batch, its files, the checkpoint and judge step it answers, its state, counts and cost) and
``main.judge_batch_lines`` (one row per prompt of a submission: its cache key, the round it is asked in, and what
became of it).

A submission is recorded before anything is sent (state ``preparing``, with every line), again when its file is
uploaded (``uploaded``) and when its batch is created (the provider's states from then on); its lines are updated
when its results are read (``collected``). A process killed between any two of those finds the record and
reconciles it with the provider (judge.batch): nothing is submitted twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from eval_pipeline.core.contracts import MAIN
from eval_pipeline.core.types import Row
from eval_pipeline.storage.warehouse import Warehouse

BATCHES = (MAIN, "judge_batches")
LINES = (MAIN, "judge_batch_lines")

# our states before the provider knows the batch, the provider's own while it works, what ends it, and ours after
PREPARING, UPLOADED, COLLECTED, LOST = "preparing", "uploaded", "collected", "lost"
WORKING = ("validating", "in_progress", "finalizing", "cancelling")
ENDED = ("completed", "failed", "expired", "cancelled")
OPEN = (PREPARING, UPLOADED, *WORKING, *ENDED)  # not yet collected

# a line's state: sent and waiting, answered (its outcome final and cached), to be asked again, or failed for good
SUBMITTED, ANSWERED, REASK, FAILED = "submitted", "answered", "reask", "failed"

BATCH_COLUMNS = [
    "submission_id",
    "batch_id",
    "state",
    "rubric",
    "checkpoint_id",
    "step",
    "judge",
    "model",
    "base_url",
    "round",
    "input_file",
    "input_file_id",
    "output_file_id",
    "error_file_id",
    "requests",
    "completed",
    "failed",
    "window",
    "reserved_cost",
    "cost",
    "online_cost",
    "currency",
    "prompt_tokens",
    "completion_tokens",
    "unseen",  # looks in a row at which the provider found the batch nowhere (judge.batch.LOST_LOOKS: lost)
    "reason",
    "created_at",
    "updated_at",
]
LINE_COLUMNS = ["submission_id", "custom_id", "round", "state", "max_tokens", "cut_at", "reason"]
_TYPES = {
    "requests": "int64",
    "completed": "int64",
    "failed": "int64",
    "unseen": "int64",
    "round": "int64",
    "prompt_tokens": "int64",
    "completion_tokens": "int64",
    "reserved_cost": "float64",
    "cost": "float64",
    "online_cost": "float64",
}


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


_TIMES = ("created_at", "updated_at")


def _batch_frame(sub: Row) -> pd.DataFrame:
    row = {c: sub.get(c) for c in BATCH_COLUMNS}
    row["unseen"] = int(sub.get("unseen") or 0)  # none in a row written before the column
    row["updated_at"] = now()
    text = {c: "string" for c in BATCH_COLUMNS if c not in _TYPES and c not in _TIMES}
    return pd.DataFrame([row], columns=BATCH_COLUMNS).astype({**_TYPES, **text})


def _line_frame(lines: Iterable[Row]) -> pd.DataFrame:
    return pd.DataFrame(list(lines), columns=LINE_COLUMNS).astype(
        {"round": "int64", "max_tokens": "int64", "cut_at": "int64", "reason": "string", "state": "string"}
    )


def record(wh: Warehouse, sub: Row, lines: Iterable[Row]) -> None:
    """The submission and all its lines, replaced in one transaction."""
    where = {"submission_id": sub["submission_id"]}
    wh.replace_partitions([(*BATCHES, where, [_batch_frame(sub)]), (*LINES, where, [_line_frame(lines)])])


def update(wh: Warehouse, sub: Row) -> None:
    """The submission's row alone (its lines unchanged)."""
    wh.replace_partition(*BATCHES, _batch_frame(sub), {"submission_id": sub["submission_id"]})


def _rows(df: pd.DataFrame) -> list[Row]:
    return [{k: (None if _missing(v) else v) for k, v in r.items()} for r in df.to_dict("records")]


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def latest_lines(wh: Warehouse, keys: list[str]) -> dict[str, Row]:
    """Each key's line of its latest round (the latest submission within it), for the keys that were ever sent."""
    if not keys or not wh.table_exists(*LINES):
        return {}
    df = wh.read(*LINES, where={"custom_id": sorted(set(keys))})
    if df.empty:
        return {}
    subs = wh.read(
        *BATCHES, columns=("submission_id", "created_at"), where={"submission_id": list(set(df.submission_id))}
    )
    df = df.merge(subs, on="submission_id", how="left").sort_values(["round", "created_at"])
    return {str(r["custom_id"]): r for r in _rows(df.drop_duplicates("custom_id", keep="last"))}


def submissions(
    wh: Warehouse, ids: Iterable[str] | None = None, states: tuple[str, ...] = (), of: Mapping[str, str] | None = None
) -> list[Row]:
    """Submissions: those of ``ids`` (None: any), in ``states`` (none given: any), whose columns equal ``of``'s
    values (e.g. one judge step's rubric, checkpoint, step and judge); oldest first."""
    if not wh.table_exists(*BATCHES):
        return []
    where: dict[str, Any] = dict(of or {})
    if ids is not None:
        wanted = sorted(set(ids))
        if not wanted:
            return []
        where["submission_id"] = wanted
    if states:
        where["state"] = list(states)
    return _rows(wh.read(*BATCHES, where=where, order_by=("created_at", "submission_id")))


def lines_of(wh: Warehouse, submission_id: str) -> list[Row]:
    return _rows(wh.read(*LINES, where={"submission_id": submission_id}, order_by=("custom_id",)))
