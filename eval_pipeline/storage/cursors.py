"""Cursors on one in-memory DuckDB that has a DuckLake attached: kept per thread between uses, and shared by a
step's reads in one transaction.

A new cursor costs a catalog read (its ``USE``), and on a DuckLake every transaction reads the catalog's snapshot
and opens the catalog again; so a thread keeps its idle cursors, and within a step (``step``) its reads run on
one cursor in one transaction (one snapshot). A write (``writer``) ends that transaction first and makes its
own, so the step's next read starts another that sees it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import cast

import duckdb

_IDLE_CURSORS = 8  # per thread and access mode: cursors kept while the lake is in use


class _Step:
    """One thread's warehouse step: the cursor it uses, and whether its reads' transaction is open."""

    def __init__(self) -> None:
        self.con: duckdb.DuckDBPyConnection | None = None
        self.reading = False
        self.writing = 0  # writes under way: a read meanwhile is part of the write, no transaction of its own


class Cursors:
    """The cursors of one process's attachment of a lake (``base(read_only)`` gives the attached connection;
    ``alias`` is the lake's name on it)."""

    def __init__(self, base: Callable[[bool], duckdb.DuckDBPyConnection], alias: str):
        self._base = base
        self._alias = alias
        self._idle = threading.local()
        self._steps = threading.local()

    def _idle_cursors(self, read_only: bool) -> list[duckdb.DuckDBPyConnection]:
        pools = getattr(self._idle, "pools", None)
        if pools is None:
            pools = self._idle.pools = {False: [], True: []}
        return cast(list[duckdb.DuckDBPyConnection], pools[read_only])

    def _take(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        idle = self._idle_cursors(read_only)
        if idle:
            return idle.pop()
        con = self._base(read_only).cursor()
        con.execute(f"USE {self._alias}")
        return con

    def _give_back(self, con: duckdb.DuckDBPyConnection, read_only: bool, healthy: bool) -> None:
        # a kept cursor never sees stale data: each statement outside a transaction reads the newest snapshot
        idle = self._idle_cursors(read_only)
        if healthy and len(idle) < _IDLE_CURSORS:
            idle.append(con)
        else:
            con.close()

    def _step(self) -> _Step | None:
        step: _Step | None = getattr(self._steps, "step", None)
        return step

    def _step_cursor(self, step: _Step) -> duckdb.DuckDBPyConnection:
        if step.con is None:
            step.con = self._take(False)
        return step.con

    @staticmethod
    def _end_reads(step: _Step, commit: bool) -> None:
        """End the step's read transaction (it wrote nothing: a commit only lets go of its snapshot)."""
        if step.reading and step.con is not None:
            step.reading = False
            try:
                step.con.execute("COMMIT" if commit else "ROLLBACK")
            except duckdb.Error:
                pass  # the transaction has ended either way, and it held no change

    @contextmanager
    def connect(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor for one use; within a step, the step's, in its read transaction."""
        step = self._step()
        if step is not None and not read_only:
            con = self._step_cursor(step)
            if not step.reading and not step.writing:
                con.execute("BEGIN TRANSACTION")
                step.reading = True
            try:
                yield con
            except BaseException:
                self._end_reads(step, commit=False)  # a failed statement has aborted the transaction
                raise
            return
        con = self._take(read_only)
        healthy = False
        try:
            yield con
            healthy = True
        finally:
            self._give_back(con, read_only, healthy)

    @contextmanager
    def writer(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor in autocommit mode for one write; within a step, the step's, its reads ended first."""
        step = self._step()
        if step is None:
            with self.connect(False) as con:
                yield con
            return
        self._end_reads(step, commit=True)
        step.writing += 1
        try:
            yield self._step_cursor(step)
        finally:
            step.writing -= 1

    @contextmanager
    def step(self) -> Iterator[None]:
        """One step of this thread (a step within it is part of it)."""
        if self._step() is not None:
            yield
            return
        step = self._steps.step = _Step()
        healthy = False
        try:
            yield
            healthy = True
        finally:
            self._steps.step = None
            if step.con is not None:
                self._end_reads(step, commit=healthy)
                self._give_back(step.con, False, healthy)
