"""One checkpoint's rows answered from one read of every checkpoint of a range (``Warehouse.ranged``).

A step that runs over a range of checkpoints (a backfill) reads, for each of them, its rows of the tables upstream:
N statements per table, each of which costs a DuckLake a few catalog queries and a scan of the table's files. While
a range is open, the first read of a table for one of its checkpoints reads that table for all of them (``IN``),
and the reads that follow are answered from what it read:

* Only plain reads take part: ``checkpoint_id`` equal to one checkpoint of the range, any other columns' values,
  any columns, any order; not ``distinct`` nor ``limit`` (answered by the warehouse as without the range).
* What a read returns is what the warehouse would have returned for that checkpoint alone: its rows in the order
  asked (``checkpoint_id`` first, then the caller's order: within one checkpoint, the same order), a fresh index,
  the columns asked for, and each column's type as DuckDB gives it for those rows alone (a whole-number or
  true/false column with a missing value is a nullable pandas type, one without is NumPy's).
* Nothing stale is answered: a write of any kind through the warehouse object drops everything read (reads of a
  table whose replacements a batch holds write them first, ``Warehouse._settle``, which is such a write).
* Each answer is a copy: a caller that changes its frame changes nothing another caller reads.
* Memory stays bounded: a read whose rows for the whole range are more than ``RANGE_READ_ROWS`` is not held;
  that question is then asked checkpoint by checkpoint for the rest of the step, as without the range.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from eval_pipeline.storage.tables import Filter

RANGE_READ_ROWS = 200_000  # rows one read for a whole range may hold (more: read checkpoint by checkpoint)

# (columns, where, order by, at most this many rows) -> the rows, or None when the table does not exist yet
Fetch = Callable[[list[str], dict[str, Filter], tuple[str, ...], int], "pd.DataFrame | None"]
_Key = tuple[str, str, tuple[str, ...], tuple[tuple[str, Any], ...], tuple[str, ...]]
_MASKED = ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "boolean")


def _frozen(value: Filter) -> Any:
    return tuple(value) if isinstance(value, (list, tuple)) else value


def as_queried(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each nullable whole-number or true/false column that holds no missing value as NumPy's type: what
    DuckDB gives for these rows when they are the whole result."""
    for col, dtype in df.dtypes.items():
        if str(dtype) in _MASKED and not df[col].isna().any():
            df[col] = df[col].astype(dtype.numpy_dtype)
    return df


class RangeReads:
    """The reads of one open range (see the module)."""

    def __init__(self, checkpoint_ids: Sequence[str]) -> None:
        self.checkpoint_ids = tuple(checkpoint_ids)
        self._ids = set(self.checkpoint_ids)
        self._read: dict[_Key, tuple[dict[str, pd.DataFrame], pd.DataFrame, bool]] = {}
        self._refused: set[_Key] = set()  # reads whose rows for the whole range were too many to hold
        self.statements = 0  # reads sent to the warehouse (for tests and benches)

    def key(
        self, schema: str, table: str, columns: Sequence[str], where: Mapping[str, Filter], order_by: Sequence[str]
    ) -> tuple[_Key, str] | None:
        """(what the read is, its checkpoint) when the range can answer it, else None."""
        ckpt = where.get("checkpoint_id")
        if not isinstance(ckpt, str) or ckpt not in self._ids:
            return None
        rest = tuple(sorted((k, _frozen(v)) for k, v in where.items() if k != "checkpoint_id"))
        return (schema, table, tuple(columns), rest, tuple(order_by)), ckpt

    def read(self, key: _Key, ckpt: str, fetch: Fetch) -> pd.DataFrame | None:
        """This checkpoint's rows for the read ``key`` names: from what the range read, reading it for the whole
        range first with ``fetch`` when it has not (since the last write); None when the range does not answer it
        (the table does not exist yet, or its rows for the range are too many to hold): the caller reads it."""
        if key not in self._read:
            if key in self._refused:
                return None
            _, _, columns, rest, order_by = key
            added = bool(columns) and "checkpoint_id" not in columns  # to split by
            cols = [*columns, "checkpoint_id"] if added else list(columns)
            where: dict[str, Filter] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in rest}
            where["checkpoint_id"] = self.checkpoint_ids
            df = fetch(cols, where, ("checkpoint_id", *order_by) if order_by else (), RANGE_READ_ROWS + 1)
            if df is None:
                return None
            if len(df) > RANGE_READ_ROWS:
                self._refused.add(key)
                return None
            self.statements += 1
            groups = {str(c): part for c, part in df.groupby("checkpoint_id", sort=False)} if len(df) else {}
            self._read[key] = (groups, df.iloc[0:0], added)
        groups, empty, added = self._read[key]
        part = groups.get(ckpt, empty).reset_index(drop=True).copy()
        if added:
            part = part.drop(columns="checkpoint_id")
        return as_queried(part)

    def forget(self) -> None:
        self._read.clear()
