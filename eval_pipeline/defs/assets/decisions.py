"""What the decisions across checkpoints share: which checkpoints need deciding again, reading their rows in one
query per table, and writing every decided checkpoint in one transaction.

The decision assets (agreement with judge_trust and calibrated_means, comparison, length_bias, gates, verdict) are
unpartitioned: each decides every checkpoint at once, in one step, after the pool and the lineage. A checkpoint is
decided again only when what it is decided from changed: each asset computes, per checkpoint, a *fingerprint* of its
inputs — the content versions of the checkpoint's rows (and its parent's) that the asset reads
(storage.versions, recorded by the partitioned assets), the fingerprints of the decisions it reads, and the
rubric's version — and compares it with the one it stored when it last decided that checkpoint
(``main.decision_inputs``). The rest is left as it is, so landing the 200th checkpoint decides the 200th (and,
when its ratings moved the judge's pooled verdict, the trust-dependent rows of the checkpoints that judge judged:
vectorized, read in one query per table).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Unpack

import dagster as dg
import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.storage import versions
from eval_pipeline.storage.tables import Filter, Frame, Select, Where
from eval_pipeline.storage.warehouse import ReadQuery, Warehouse

# the decisions' own code: a change that gives other answers from the same inputs bumps it (2: the people baseline
# from people only, agreement.between, #72; 3: trust decided along the ratings' arrival and held, the sequences
# widened at small sizes, #72; 4: Spearman's sigma from its influence function, the active design's small-sample
# factor and Hajek's variance of the people's mean, #72.2/#72.4)
SCHEME = 4
NO_PARENT = "-"


class Inputs:
    """What every decision asset reads first, in a few small queries: the checkpoints the rubric scored and their
    parents (``checkpoint_lineage``), the content versions of their rows, and the stored fingerprints."""

    def __init__(self, wh: Warehouse, rubric: RubricConfig) -> None:
        self.rubric = rubric
        lineage = (
            wh.read(rubric.name, Table.CHECKPOINT_LINEAGE)
            if wh.table_exists(rubric.name, Table.CHECKPOINT_LINEAGE)
            else pd.DataFrame(columns=["checkpoint_id", "parent_id"])
        )
        self.parents: dict[str, str | None] = {
            str(c): (str(p) if isinstance(p, str) and p else None)
            for c, p in zip(lineage.checkpoint_id, lineage.parent_id)
        }
        self.checkpoints = sorted(self.parents)
        self.versions = versions.read_versions(wh, rubric.name)
        self.decided = versions.read_decided(wh, rubric.name)
        self._by_checkpoint: dict[str, list[tuple[str, str]]] = {}
        for (name, ckpt), version in sorted(self.versions.items()):
            self._by_checkpoint.setdefault(ckpt, []).append((name, version))

    def v(self, name: str, ckpt: str | None) -> str:
        """The content version of ``ckpt``'s rows of ``name`` (ABSENT: none, or no such checkpoint)."""
        return versions.ABSENT if ckpt is None else self.versions.get((name, ckpt), versions.ABSENT)

    def has(self, name: str, ckpt: str) -> bool:
        """Whether ``ckpt``'s asset that writes ``name`` has run (its version was recorded)."""
        return (name, ckpt) in self.versions

    def own(self, ckpt: str | None, *names: str) -> tuple[str, ...]:
        return tuple(self.v(n, ckpt) for n in names)

    def everything(self, ckpt: str | None) -> tuple[tuple[str, str], ...]:
        """The versions of all of ``ckpt``'s rows, table by table."""
        return tuple(self._by_checkpoint.get(ckpt, [])) if ckpt is not None else ()

    def decisions(self, ckpt: str, *assets: str) -> tuple[str | None, ...]:
        """The fingerprints ``ckpt`` was last decided from by ``assets`` (each decided earlier in the run)."""
        return tuple(self.decided.get((a, ckpt)) for a in assets)

    def parent(self, ckpt: str) -> str | None:
        return self.parents.get(ckpt)

    def with_parents(self, ckpts: Sequence[str]) -> list[str]:
        """These checkpoints and their parents (what a decision about a checkpoint and its parent reads)."""
        return [*ckpts, *(p for c in ckpts if (p := self.parents.get(c)))]

    def fingerprint(self, *parts: object) -> str:
        return versions.fingerprint(SCHEME, self.rubric.version, *parts)

    def stored(self, asset: str, ckpt: str) -> str | None:
        return self.decided.get((asset, ckpt))

    @staticmethod
    def in_two(first: str, second: str) -> str:
        """A fingerprint in two parts (what a checkpoint's own rows are, what else it is decided from), so that a
        decision can tell when only the second moved (``first_unchanged``)."""
        return f"{first}+{second}"

    def first_unchanged(self, asset: str, ckpt: str, first: str) -> bool:
        """Whether ``asset`` last decided ``ckpt`` from a two-part fingerprint whose first part is ``first``."""
        return (self.decided.get((asset, ckpt)) or "").split("+")[0] == first

    def todo(self, asset: str, fingerprints: Mapping[str, str]) -> list[str]:
        """The checkpoints whose fingerprint differs from the one ``asset`` stored (in checkpoint order)."""
        return [c for c in sorted(fingerprints) if self.decided.get((asset, c)) != fingerprints[c]]


Part = tuple[str, str, Where, Sequence[Frame | Select]]


def commit(
    wh: Warehouse, rubric: RubricConfig, decided: Mapping[str, Mapping[str, str]], parts: Sequence[Part]
) -> None:
    """Write ``parts`` (each decided checkpoint's rows of a table, or several checkpoints' at once) and the
    fingerprints they were decided from (``decided``: asset -> checkpoint -> fingerprint), in one transaction."""
    marks: list[Part] = []
    for asset, by in decided.items():
        if by:
            where = {"schema_name": rubric.name, "asset": asset, "checkpoint_id": tuple(sorted(by))}
            marks.append((*versions.DECISIONS, where, [versions.decided_rows(rubric.name, asset, by)]))
    if parts or marks:
        versions.bookkeeping(wh)
        wh.replace_partitions([*parts, *marks])


def commit_table(
    wh: Warehouse, rubric: RubricConfig, table: str, fingerprints: Mapping[str, str], frames: Mapping[str, pd.DataFrame]
) -> None:
    """The decided checkpoints' rows of the decision asset ``table`` (``frames``), and what each was decided from."""
    commit_rows(wh, rubric, table, fingerprints, list(frames), rows_of(frames))


def commit_rows(
    wh: Warehouse,
    rubric: RubricConfig,
    table: str,
    fingerprints: Mapping[str, str],
    done: Sequence[str],
    rows: pd.DataFrame,
) -> None:
    """``commit_table`` with the decided checkpoints' (``done``) rows as one frame (``rows``)."""
    decided = {table: {c: fingerprints[c] for c in sorted(done)}}
    commit(wh, rubric, decided, [rows_part(rubric.name, table, done, rows)])


def rows_of(frames: Mapping[str, pd.DataFrame], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Several checkpoints' frames of one table as one (empty frames dropped)."""
    kept = [f for f in frames.values() if len(f)]
    if not kept:  # no rows: the columns of the first, so a table nobody made yet is made with them
        return next(iter(frames.values()), pd.DataFrame(columns=list(columns or []))).iloc[:0]
    if len(kept) == 1:
        return kept[0].reset_index(drop=True)
    with warnings.catch_warnings():  # all-NA columns keep the dtype of the frames that have values
        warnings.simplefilter("ignore", FutureWarning)
        return pd.concat(kept, ignore_index=True)


def part(schema: str, table: str, checkpoints: Sequence[str], frames: Mapping[str, pd.DataFrame]) -> Part:
    """The rows of ``checkpoints`` in ``schema.table`` replaced by ``frames`` (one DELETE, one INSERT)."""
    return rows_part(schema, table, checkpoints, rows_of(frames))


def rows_part(schema: str, table: str, checkpoints: Sequence[str], rows: pd.DataFrame) -> Part:
    """``part`` with the checkpoints' rows as one frame."""
    return (schema, table, {"checkpoint_id": tuple(sorted(checkpoints))}, [rows] if len(rows.columns) else [])


def decided_metadata(total: int, done: Sequence[str], /, **extra: Any) -> dict[str, dg.MetadataValue]:
    shown = ", ".join(done[:20]) + (f" … ({len(done)} in all)" if len(done) > 20 else "")
    return {
        "checkpoints": dg.MetadataValue.int(total),
        "decided_again": dg.MetadataValue.int(len(done)),
        "decided": dg.MetadataValue.text(shown or "none: nothing they are decided from changed"),
        **extra,
    }


@dataclass
class _Fetched:
    """One table's rows of the fetched checkpoints: the columns read (None: all of them), the rows by checkpoint."""

    columns: frozenset[str] | None
    by: dict[str, pd.DataFrame]

    def covers(self, need: frozenset[str] | None) -> bool:
        return self.columns is None or (need is not None and need <= self.columns)


class Prefetched:
    """The rows of a set of checkpoints, read once per table (one query: ``checkpoint_id IN (...)``) and kept by
    checkpoint, answering the reads a per-checkpoint decision makes (``read``, ``count``, ``table_exists``,
    ``session``) from memory, as ``Warehouse`` would. Only the columns asked for are read (with those the filters
    name): a count reads the checkpoint column, not the rows' texts; a later read that needs more columns of the
    table reads it again with the union. A table without a ``checkpoint_id`` column, or a read of a checkpoint not
    fetched, goes to the warehouse itself."""

    def __init__(self, wh: Warehouse, checkpoints: Sequence[str]) -> None:
        self.wh, self.checkpoints = wh, tuple(sorted(set(checkpoints)))
        self._frames: dict[tuple[str, str], _Fetched | None] = {}  # None: a table not by checkpoint
        self._exists: dict[tuple[str, str], bool] = {}

    def _frame(self, schema: str, table: str, ckpts: Sequence[str], need: frozenset[str] | None) -> pd.DataFrame | None:
        """The rows of ``ckpts`` with at least the columns ``need`` (None: every column), every fetched
        checkpoint's read at once."""
        key = (schema, table)
        if key in self._frames and self._frames[key] is None:
            return None
        held = self._frames.get(key)
        if held is None or not held.covers(need):
            cols = self.wh.columns(schema, table) if self.table_exists(schema, table) else {}
            if "checkpoint_id" not in cols:
                self._frames[key] = None
                return None
            before = (held.columns if held is not None else None) or frozenset()  # widened: read again with them
            wanted = None if need is None else need | before | {"checkpoint_id"}
            order = [c for c in cols if wanted is None or c in wanted]
            where = {"checkpoint_id": self.checkpoints}
            whole = self.wh.read(schema, table, columns=order if wanted is not None else (), where=where)
            by = {str(c): g for c, g in whole.groupby("checkpoint_id", sort=False)}
            held = _Fetched(
                None if wanted is None else frozenset(order), {c: by.get(c, whole.iloc[:0]) for c in self.checkpoints}
            )
            self._frames[key] = held
        parts = [held.by[c] for c in ckpts]
        return parts[0] if len(parts) == 1 else pd.concat(parts)

    def table_exists(self, schema: str, table: str) -> bool:
        """Asked of the warehouse once a table (the decisions read what was there when they began)."""
        key = (schema, table)
        if key not in self._exists:
            self._exists[key] = self.wh.table_exists(schema, table)
        return self._exists[key]

    @contextmanager
    def session(self) -> Iterator[Prefetched]:
        yield self

    def _covered(self, where: Mapping[str, Filter] | None) -> list[str] | None:
        """The checkpoints ``where`` reads, when every one of them was fetched; else None."""
        ckpt = (where or {}).get("checkpoint_id")
        if ckpt is None:
            return None
        wanted = [str(c) for c in ckpt] if isinstance(ckpt, list | tuple) else [str(ckpt)]
        return wanted if wanted and all(c in self.checkpoints for c in wanted) else None

    @staticmethod
    def _match(df: pd.DataFrame, where: Mapping[str, Filter] | None) -> pd.DataFrame:
        for col, value in (where or {}).items():
            if col == "checkpoint_id":
                continue  # the frame holds those checkpoints' rows
            if value is None:
                df = df[df[col].isna()]
            elif isinstance(value, list | tuple):
                df = df[df[col].isin(list(value))]
            else:
                df = df[df[col] == value]
        return df

    def _rows(
        self, schema: str, table: str, where: Mapping[str, Filter] | None, columns: Sequence[str] | None
    ) -> pd.DataFrame | None:
        """The fetched rows ``where`` selects, with the ``columns`` asked for (None: all); None: not fetched."""
        ckpts = self._covered(where)
        need = None if columns is None else frozenset([*columns, *(where or {})])
        frame = self._frame(schema, table, ckpts, need) if ckpts else None
        return None if frame is None else self._match(frame, where)

    def read(self, schema: str, table: str, **query: Unpack[ReadQuery]) -> pd.DataFrame:
        columns, order_by, limit = query.get("columns", ()), query.get("order_by", ()), query.get("limit")
        df = self._rows(schema, table, query.get("where"), columns or None)
        if df is None:
            return self.wh.read(schema, table, **query)
        if columns:
            df = df[list(columns)]
        if query.get("distinct"):
            df = df.drop_duplicates()
        if order_by:
            df = df.sort_values(list(order_by), kind="stable")
        if limit is not None:
            df = df.head(limit)
        return df.reset_index(drop=True)

    def count(
        self, schema: str, table: str, where: Mapping[str, Filter] | None = None, distinct: Sequence[str] = ()
    ) -> int:
        df = self._rows(schema, table, where, distinct)
        if df is None:
            return self.wh.count(schema, table, where, distinct)
        return int(len(df[list(distinct)].drop_duplicates()) if distinct else len(df))
