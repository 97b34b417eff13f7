"""Partition replacements of many checkpoints written together (``Warehouse.batched``).

A step that runs over a range of checkpoints (a backfill) replaces one partition of each table it writes per
checkpoint. On a DuckLake each ``DELETE`` of a partition costs a scan of the table's files, so 50 checkpoints' 50
deletes and 50 inserts cost ~10× one ``DELETE … IN (50 ids)`` followed by the 50 inserts (bench/bench_landing.py,
docs/design/landing-cost.md). While a batch is open, a replacement of plain frames is held here and written with
the others of its table when the batch ends, in one transaction:

* What a reader sees is what it would see without the batch: a read that names a table with held rows (by name,
  or a query whose text names it), a raw connection, any other kind of write, or a replacement that this queue
  cannot merge writes the held ones first.
* Each checkpoint's rows stay atomic (one transaction holds them all); when a step fails part-way, what its earlier
  checkpoints wrote is written before the failure goes on up.
* Only replacements that change no table's shape are held: the first write that makes a table, adds a column or
  gives a column its type (``tables.ensure_table``) is written at once, as without the batch.
* Held rows are bounded (``max_rows``): past them the queue is written out.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa

from eval_pipeline.storage.tables import Filter, Frame, Known, Select, Where, changes_shape

MAX_ROWS = 200_000  # rows held before the queue is written out (a few tens of MB of pandas)

Part = tuple[str, str, Where, Sequence[Frame | Select]]


@dataclass
class _Group:
    """The held replacements of one table that differ only by checkpoint: one ``DELETE … IN``, their inserts."""

    schema: str
    table: str
    fixed: dict[str, Filter]  # the partition's other columns (the same for every checkpoint of the group)
    frames: dict[str, list[Frame]] = field(default_factory=dict)  # checkpoint -> its rows (the latest write wins)

    def part(self) -> Part:
        ids = tuple(self.frames)
        where: dict[str, Filter] = {**self.fixed, "checkpoint_id": ids[0] if len(ids) == 1 else ids}
        return (self.schema, self.table, where, [f for fs in self.frames.values() for f in fs])


class Batch:
    """The replacements held back while a batch is open, by table (see the module's docstring)."""

    def __init__(self, write: Callable[[Sequence[Part]], list[int]], max_rows: int = MAX_ROWS) -> None:
        self._write, self.max_rows = write, max_rows
        self._groups: dict[tuple[str, str, tuple[tuple[str, Filter], ...]], _Group] = {}
        self._tables: dict[tuple[str, str], tuple[str, ...]] = {}  # table -> the partition columns held for it
        self.rows = 0
        self._lock = threading.RLock()  # a step's threads (the judge's, the engine's) may read and write at once

    def __bool__(self) -> bool:
        return bool(self._groups)

    def holds(self, schema: str, table: str) -> bool:
        return (schema, table) in self._tables

    def named_in(self, sql: str) -> bool:
        """Whether the query's text names a table with held rows (by its bare name: a word of the text)."""
        return any(re.search(rf"\b{re.escape(t)}\b", sql, re.IGNORECASE) for _, t in list(self._tables))

    def take(self, parts: Sequence[Part], known: Known | None) -> list[int] | None:
        with self._lock:
            return self._take(parts, known)

    def _take(self, parts: Sequence[Part], known: Known | None) -> list[int] | None:
        """Hold ``parts`` and return the rows each will insert; None when they cannot be held (the caller
        writes them now, after ``flush``): a part that is not one checkpoint's plain frames, a table whose shape
        they would change, or a partition whose columns differ from those held for its table."""
        if known is None:
            return None
        for schema, table, where, frames in parts:
            ckpt = where.get("checkpoint_id")
            if not isinstance(ckpt, str) or any(isinstance(v, list | tuple) for v in where.values()):
                return None
            keys = tuple(sorted(where))
            if self._tables.get((schema, table), keys) != keys:
                return None
            have = known.get((schema, table))
            if not frames or any(not isinstance(f, pd.DataFrame | pa.Table) or changes_shape(f, have) for f in frames):
                return None
        counts = []
        for schema, table, where, frames in parts:
            fixed = {k: v for k, v in where.items() if k != "checkpoint_id"}
            key = (schema, table, tuple(sorted(fixed.items())))
            group = self._groups.setdefault(key, _Group(schema, table, fixed))
            plain = [f for f in frames if not isinstance(f, Select)]  # all of them (checked above): typed as such
            old = group.frames.pop(str(where["checkpoint_id"]), [])
            self.rows -= sum(len(f) for f in old)
            group.frames[str(where["checkpoint_id"])] = plain
            self._tables[(schema, table)] = tuple(sorted(where))
            n = sum(len(f) for f in plain)
            self.rows += n
            counts.append(n)
        if self.rows > self.max_rows:
            self.flush()
        return counts

    def flush(self) -> None:
        """Write every held replacement: one transaction, one delete per table and partition columns."""
        with self._lock:
            if not self._groups:
                return
            parts = [g.part() for g in self._groups.values()]
            self._groups, self._tables, self.rows = {}, {}, 0
            self._write(parts)
