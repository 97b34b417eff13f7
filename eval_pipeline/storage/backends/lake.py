"""DuckLake as the warehouse: a catalog in SQLite (the embedded default) or PostgreSQL, rows as Parquet files.

    ducklake:sqlite:data/lake/catalog.sqlite            the default: any number of local processes
    ducklake:postgres:dbname=evals host=db.internal     many machines

Readers never wait for writers and writers never wait for readers: every commit is a snapshot, and a reader sees
whole snapshots only. The rows go to ``EVAL_WAREHOUSE_DATA`` (default: ``<catalog>.files/`` beside a SQLite
catalog; a PostgreSQL catalog needs it set, on storage every machine sees). The extensions are loaded from their
PyPI packages (``duckdb-extension-ducklake``, ``-sqlite-scanner``, ``-postgres-scanner``, pinned to the duckdb
version): nothing is downloaded at run time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import duckdb

import eval_pipeline.storage.objects as objects
import eval_pipeline.storage.readonly as readonly
from eval_pipeline.core import settings
from eval_pipeline.core.locks import file_lock_or_skip
from eval_pipeline.storage.backend import BackendError
from eval_pipeline.storage.backends.file import duckdb_config, in_memory_config
from eval_pipeline.storage.cursors import Cursors
from eval_pipeline.storage.extensions import extension_file
from eval_pipeline.storage.registry import backend
from eval_pipeline.storage.tables import CATALOG_SQL, Known, literal, qualified

T = TypeVar("T")
PREFIX = "ducklake:"
ALIAS = "lake"
KEEP_SMALL_ROWS = 1_000_000  # a bookkeeping write's rows inlined in the catalog (keep_small)
# a snapshot replaced, or a file merged away, less than this long ago is kept: a query that took the snapshot when
# it started may still be reading it and its files
READER_GRACE_MINUTES = 10
# ``upkeep`` merges the lake's small files once it holds more than this many a table on average: every partition
# write leaves one, and each statement pays for the files of the tables it reads (a landing at k = 56: 21.8 CPU-s
# with 942 files, 17.2 once merged into 22; docs/design/landing-cost.md)
UPKEEP_FILES_PER_TABLE = 8


# each table's data files, by schema (the catalog's own schema table names the schema of a table id)
TABLE_FILES_SQL = (
    f"SELECT s.schema_name, t.table_name, t.file_count FROM ducklake_table_info('{ALIAS}') t "
    f"JOIN __ducklake_metadata_{ALIAS}.ducklake_schema s ON s.schema_id = t.schema_id AND s.end_snapshot IS NULL"
)


def _lake_tables(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """The lake's tables, (schema, table), in order."""
    sql = "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? ORDER BY 1, 2"
    return [(str(s), str(t)) for s, t in con.execute(sql, [ALIAS]).fetchall()]


def _scheduled_before(minutes: int) -> str:
    """SQL for ``ducklake_cleanup_old_files``'s ``older_than`` that spares every file scheduled for deletion less
    than ``minutes`` ago. DuckLake 1.5.5 on a SQLite catalog compares it with the stored time as text ('YYYY-MM-DD
    HH…' against 'YYYY-MM-DDTHH…'): any time on the same day counts as older, so the bound is in effect the end of
    its day. A day earlier, the end of that day is at least ``minutes`` ago (tests/reliability/test_ducklake.py
    fails when DuckLake changes this)."""
    return f"now() - INTERVAL '1 day' - INTERVAL '{int(minutes)} minutes'"


def is_retryable(exc: BaseException) -> bool:
    """A commit that lost a race with another writer (the catalog was busy, or the same rows changed): the whole
    transaction can run again. Not an object store that failed a request: httpfs has retried it already
    (EVAL_S3_RETRIES), and a store that is down stays down for longer than this loop waits."""
    msg = str(exc).lower()
    if objects.unanswered_hint(str(exc)):
        return False
    return isinstance(exc, duckdb.Error) and any(
        w in msg for w in ("database is locked", "conflict", "could not serialize", "busy", "failed to commit")
    )


def _snapshot_option(as_of: str) -> str:
    if as_of.strip().isdigit():
        return f"SNAPSHOT_VERSION {int(as_of)}"
    try:
        stamp = datetime.fromisoformat(as_of.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"--as-of {as_of!r}: give a snapshot id or an ISO-8601 timestamp") from exc
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return f"SNAPSHOT_TIME {literal(stamp.isoformat())}"


class LakeBackend:
    """A DuckLake attached to an in-memory DuckDB held by this object (one per access mode); each use gets a
    cursor on it, taken from this thread's idle cursors when there is one. The catalog's tables and columns are
    read once and kept (tables are only ever added outside the staging schema); a write that finds a remembered
    table gone forgets them and runs again.

    Within a step (``step_scope``) the thread's reads share one cursor and one transaction, so one snapshot
    (``storage.cursors``)."""

    ddl_in_transaction = True
    concurrent_writers = True
    catalog_kind = ""  # "sqlite" or "postgres": the scanner extension that reads the catalog

    def __init__(self, spec: str, catalog: str, data_path: str, data_beside: bool = False):
        self.spec = spec
        self.catalog = catalog  # "sqlite:<path>" or "postgres:<conninfo>"
        self.data_path = data_path
        # the data is wherever the catalog is (``<catalog>.files/``), not the path the catalog recorded: a project
        # folder moved, copied or renamed keeps its lake
        self.data_beside = data_beside
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._bases: dict[bool, duckdb.DuckDBPyConnection] = {}
        self._cursors = Cursors(self._base, ALIAS)
        self._bulk = 0  # bulk() blocks under way: every core meanwhile
        self._known: Known | None = None

    # --- what differs between catalogs ----------------------------------------------------------

    def exists(self) -> bool:
        return True

    def describe(self) -> str:
        return f"ducklake:{self.catalog}"

    def _prepare(self) -> None:
        """Before the first attach of a writer."""

    def _catalog_options(self) -> list[str]:
        return []

    # --- connections ---------------------------------------------------------------------------

    def attach_options(self, read_only: bool, as_of: str | None = None, data_path: str | None = None) -> str:
        """ATTACH options: the data path, the catalog's own, a snapshot to read (``as_of``), the access mode."""
        options = [f"DATA_PATH {literal(data_path or self.data_path)}"]
        if data_path or self.data_beside:
            options.append("OVERRIDE_DATA_PATH true")
        if as_of is not None:
            options.append(_snapshot_option(as_of))
        options += self._catalog_options()
        if read_only:
            options.append("READ_ONLY")
        else:
            options.append(f"DATA_INLINING_ROW_LIMIT {settings.lake_inline_rows()}")
        return ", ".join(options)

    def _new_base(
        self, read_only: bool, config: dict[str, Any], as_of: str | None = None, data_path: str | None = None
    ) -> duckdb.DuckDBPyConnection:
        con = duckdb.connect(":memory:", config={**config, **readonly.BASE_CONFIG})
        try:
            con.execute(f"LOAD {literal(extension_file(self.catalog_kind))}")
            con.execute(f"LOAD {literal(extension_file('ducklake'))}")
            if objects.is_remote(self.data_path):  # the rows on object storage, credentials from the environment
                objects.enable(con)
            elif data_path is not None:
                con.register_filesystem(readonly.ReadOnlyFileSystem(root=self.data_path))
            options = self.attach_options(read_only, as_of, data_path)
            sql = f"ATTACH {literal(PREFIX + self.catalog)} AS {ALIAS} ({options})"
            first: duckdb.Error | None = None  # the first failure that was not a name left by a failed attempt
            for attempt in range(20):  # a new catalog being made by another process at this moment: look again
                try:
                    con.execute(sql)
                    break
                except duckdb.Error as exc:
                    if "does not match existing data path" in str(exc):
                        raise BackendError(_moved_data(self.describe(), data_path or self.data_path, exc)) from None
                    if first is None and "already exists" not in str(exc):
                        first = exc
                    if attempt == 19 or not ("already exists" in str(exc) or is_retryable(exc)):
                        # what went wrong first (a full disk), not what a failed attempt left behind: 'database
                        # with name "lake" already exists'
                        raise (first or exc) from None
                    with contextlib.suppress(duckdb.Error):  # a half-made attachment of the failed attempt
                        con.execute(f"DETACH DATABASE IF EXISTS {ALIAS}")
                    time.sleep(0.1 + 0.1 * attempt)
            con.execute(f"USE {ALIAS}")
        except BaseException:
            con.close()
            raise
        return con

    def _base(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._pid != os.getpid():  # a forked child never shares its parent's handles
                self._bases, self._known, self._pid = {}, None, os.getpid()
                self._cursors = Cursors(self._base, ALIAS)
            base = self._bases.get(read_only)
            if base is None:
                if not read_only:
                    self._prepare()
                base = self._bases[read_only] = self._new_base(read_only, in_memory_config())
                self._set_threads(base)
            return base

    def _set_threads(self, base: duckdb.DuckDBPyConnection) -> None:
        base.execute("RESET threads" if self._bulk else "SET threads = 1")

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Every core for the pipeline's connections meanwhile; one thread otherwise. Most of a run's statements
        are small, and on a lake each reads the catalog through a few small queries, for which waking DuckDB's
        other threads costs more than they save (docs/design/warehouse.md)."""
        with self._lock:
            self._bulk += 1
            if self._bulk == 1:
                for base in self._bases.values():
                    self._set_threads(base)
        try:
            yield
        finally:
            with self._lock:
                self._bulk -= 1
                if self._bulk == 0:
                    for base in self._bases.values():
                        self._set_threads(base)

    def connect(self, read_only: bool = False) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        if read_only and not self.exists():
            raise FileNotFoundError(f"warehouse {self.describe()} does not exist yet: run the pipeline first")
        return self._cursors.connect(read_only)

    def writer(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        return self._cursors.writer()

    def open_reader(self, as_of: str | None = None) -> duckdb.DuckDBPyConnection:
        if not self.exists():
            raise FileNotFoundError(f"warehouse {self.describe()} does not exist yet: run the pipeline first")
        remote = objects.is_remote(self.data_path)
        data = self.data_path if remote else readonly.url(self.data_path)
        con = self._new_base(True, duckdb_config(), as_of, data_path=None if remote else data)
        try:
            readonly.seal(con, [data])
        except BaseException:
            con.close()
            raise
        return con

    # --- scopes, catalog cache, races -------------------------------------------------------------

    @contextmanager
    def run_scope(self) -> Iterator[None]:
        yield

    def step_scope(self) -> AbstractContextManager[None]:
        return self._cursors.step()

    def known(self) -> Known | None:
        with self._lock:
            known = self._known
        if known is None:
            known = {}
            with self.connect() as con:
                for schema, table, column, kind in con.execute(CATALOG_SQL).fetchall():
                    known.setdefault((schema, table), {})[column] = kind
            with self._lock:
                self._known = known
        return known

    def forget(self) -> None:
        with self._lock:
            self._known = None

    def retrying(self, write: Callable[[], T]) -> T:
        delay = 0.02
        refreshed = False
        for attempt in range(40):
            try:
                return write()
            except (duckdb.CatalogException, duckdb.BinderException):
                if refreshed:
                    raise
                self.forget()  # a table this process remembered is gone or changed: ask the catalog again
                refreshed = True
            except duckdb.Error as exc:
                if not is_retryable(exc) or attempt == 39:
                    raise
                time.sleep(delay + random.uniform(0, delay))
                delay = min(delay * 1.5, 1.0)
        raise AssertionError("unreachable")

    def keep_small(self, schema: str, table: str) -> None:
        """The table's rows inlined in the catalog however many a write brings (DuckLake's per-table option): its
        many small writes leave no Parquet file each, so reading it whole stays one catalog query."""
        self._run(
            f"CALL {ALIAS}.set_option('data_inlining_row_limit', {KEEP_SMALL_ROWS}, "
            f"schema => {literal(schema)}, table_name => {literal(table)})"
        )

    def upkeep(self, schemas: Collection[str] | None = None) -> str | None:
        """Merge the small files once a table (of ``schemas``; any: None) has more than UPKEEP_FILES_PER_TABLE
        (one catalog query when none has), as ``_merge_files`` does, each merge tried once: one that loses a race
        with another writer's commit (two commands of other rubric groups at once) is left for a later upkeep, not
        retried against a busy lake. Snapshots are left as they are (the time travel ``maintain --keep-days``
        keeps); the files merged away are deleted by ``maintain`` once no kept snapshot needs them."""
        with self.connect() as con:
            found = con.execute(TABLE_FILES_SQL).fetchall()
        due = [
            (str(s), str(t), int(n))
            for s, t, n in found
            if n > UPKEEP_FILES_PER_TABLE and (schemas is None or s in schemas)
        ]
        if not due:
            return None
        files = (
            f"{sum(n for *_, n in due)} data files of {len(due)} tables (more than {UPKEEP_FILES_PER_TABLE} a table)"
        )
        with self._upkeep_turn() as mine:
            if not mine:
                return f"did not merge {files}: another process's upkeep was merging (left for a later upkeep)"
            try:
                return f"merged {files}" + self._merge_files([(s, t) for s, t, _ in due], once=True, whole=False)
            except duckdb.Error as exc:
                if not is_retryable(exc):
                    raise
                return f"did not merge {files}: another writer was committing (left for a later upkeep)"

    @contextlib.contextmanager
    def _upkeep_turn(self) -> Iterator[bool]:
        """Whether this process has the lake's upkeep to itself on this machine (a lock file taken without waiting,
        beside a local catalog, in the temporary folder for a server's): merges of one lake from several processes
        at once (a UI backfill's decision runs ending together) crashed a run process in DuckDB 1.5.5 (SIGSEGV in
        a memcpy, a 200-checkpoint backfill twice out of two), so the others leave theirs for a later run."""
        where = self.catalog.split(":", 1)[1]
        if self.catalog.startswith("postgres:"):
            key = hashlib.sha256(where.encode()).hexdigest()[:16]
            path = Path(tempfile.gettempdir()) / f"eval_pipeline-upkeep-{key}.lock"
        else:
            path = Path(where + ".upkeep.lock")
        with file_lock_or_skip(path) as mine:
            yield mine

    def _merge_files(self, tables: list[tuple[str, str]] | None = None, once: bool = False, whole: bool = True) -> str:
        """Merge the lake's small files; what it could not merge, said for the message (left for a later upkeep:
        "" when every table was merged). Each call on an attachment of its own, the whole lake's first, then, when
        it fails, ``tables`` (default: every table) one at a time: DuckLake 1.5.5's compactor caches a snapshot's
        catalog by schema version alone and then fails ("DuckLakeCompactor: failed to find table entry for given
        snapshot id", duckdb/ducklake#955) on an attachment that has read the catalog at other snapshots, or across
        tables in one call. Each call is retried when its commit loses a race, or, ``once``, not (the race's error
        goes up). ``whole`` False: ``tables`` only, one at a time (an upkeep: the tables that are due, not the
        lake's others that another process may be writing)."""

        def fresh(sql: str) -> None:
            con = self._new_base(False, in_memory_config())
            try:
                con.execute(sql)
            finally:
                con.close()

        def merged(sql: str) -> bool:
            """Whether the merge went through (False: the compactor's failure of duckdb/ducklake#955)."""
            try:
                fresh(sql) if once else self.retrying(partial(fresh, sql))
            except duckdb.Error as exc:
                if "DuckLakeCompactor" not in str(exc):
                    raise
                return False
            return True

        if whole and merged(f"CALL ducklake_merge_adjacent_files('{ALIAS}')"):
            return ""
        if tables is None:
            with self.connect() as con:
                tables = _lake_tables(con)
        left = [
            f"{schema}.{table}"
            for schema, table in tables
            if not merged(
                f"CALL ducklake_merge_adjacent_files('{ALIAS}', {literal(table)}, schema => {literal(schema)})"
            )
        ]
        return f"; not {', '.join(left)} (DuckLake could not: duckdb/ducklake#955)" if left else ""

    def maintain(self, keep_days: int) -> Iterator[str]:
        run, spared = self._run, _scheduled_before(READER_GRACE_MINUTES)
        steps: list[tuple[str, Callable[[], str | None]]] = [
            (
                "moved rows kept in the catalog to Parquet files",
                partial(run, f"CALL ducklake_flush_inlined_data('{ALIAS}')"),
            ),
            ("merged small files", self._merge_files),
            ("expired snapshots", partial(self.retrying, partial(self._expire_snapshots, keep_days))),
            (  # files merged away or of expired snapshots, once no query that began before can still read them
                "deleted unneeded files",
                partial(run, f"CALL ducklake_cleanup_old_files('{ALIAS}', older_than => {spared})"),
            ),
            (  # files of steps that failed before their commit (a store that stopped answering); a day old, so
                # that the files of a step writing now are left alone
                "deleted files no snapshot lists",
                partial(run, f"CALL ducklake_delete_orphaned_files('{ALIAS}', older_than => now() - INTERVAL '1 day')"),
            ),
        ]
        for what, step in steps:
            yield what + (step() or "")  # each retried on its own (``_run``, ``retrying``); a merge says what it left

    def _expire_snapshots(self, keep_days: int) -> None:
        """Expire the snapshots replaced by a later one more than ``keep_days`` days ago — and more than
        READER_GRACE_MINUTES ago, whatever ``keep_days`` says. What a snapshot is needed for is the time it was
        current: ``--as-of T`` reads the one current at T, however old it is, and a query that started on it reads
        its files until it ends. Expiring by age instead expired the snapshot a reader had just taken when
        maintenance itself committed the next one: the reader failed ("No snapshot found in DuckLake") or, its
        files deleted under it, saw a partition missing."""
        with self.connect() as con:
            (versions,) = con.execute(
                f"""SELECT coalesce(list(snapshot_id ORDER BY snapshot_id), [])
                FROM (SELECT snapshot_id, lead(snapshot_time) OVER (ORDER BY snapshot_id) AS replaced_at
                      FROM ducklake_snapshots('{ALIAS}'))
                WHERE replaced_at < least(now() - to_days(?), now() - to_minutes(?))""",
                [keep_days, READER_GRACE_MINUTES],
            ).fetchone() or ([],)
            if versions:
                con.execute(f"CALL ducklake_expire_snapshots('{ALIAS}', versions => ?)", [versions])

    def repair(self) -> Iterator[str]:
        """A lake whose data folder lost files (deleted or changed outside the pipeline): every table the catalog
        lists a missing file of is dropped (its rows cannot all be read; a re-run rebuilds it), the others are left
        as they are. Yields what it did, table by table. Local data folders only (an object store's files are not
        checked here)."""
        if "://" in self.data_path:
            raise BackendError(f"repair checks a local data folder; {self.data_path} is not one")
        with self.connect() as con:
            tables = _lake_tables(con)
            damaged = []
            for schema, table in tables:
                files = con.execute(
                    f"SELECT data_file FROM ducklake_list_files('{ALIAS}', ?, schema => ?)", [table, schema]
                ).fetchall()
                lost = sum(1 for (f,) in files if not os.path.exists(f))
                if lost:
                    damaged.append((schema, table, lost, len(files)))
        if not damaged:
            yield "every file the catalog lists is in the data folder: nothing to repair"
            return
        for schema, table, lost, total in damaged:
            self._run(f"DROP TABLE {ALIAS}.{qualified(schema, table)}")
            yield f"dropped {schema}.{table} ({lost} of its {total} data files are missing)"
        yield "re-run the checkpoints (eval-pipeline run) to rebuild what was dropped"

    def _run(self, sql: str) -> None:
        """Run one statement that writes, as one transaction retried when it loses a race with another writer
        (``retrying``): every write of this backend goes through here or through ``retrying`` itself. Under load a
        SQLite catalog's busy timeout can pass before another writer's commit ends ("database is locked")."""

        def once() -> None:
            with self.connect() as con:
                con.execute(sql)

        self.retrying(once)

    def stored_files(self) -> list[Path]:
        if objects.is_remote(self.data_path):  # on object storage: no local file holds the lake's rows
            return []
        return sorted(p for p in Path(self.data_path).rglob("*") if p.is_file())

    def attach_sql(self) -> str:
        """Statements that open this lake read-only in any DuckDB 1.5.5 (the CLI, Python): the extensions LOADed
        from the installed packages (nothing downloaded), the lake attached read-only as ``lake`` and made current."""
        remote = (
            f"LOAD {literal(extension_file('httpfs'))};\n"
            "-- the rows are on object storage: CREATE SECRET (TYPE s3, KEY_ID …, SECRET …, …) with your credentials\n"
            if objects.is_remote(self.data_path)
            else ""
        )
        return (
            f"LOAD {literal(extension_file(self.catalog_kind))};\n"
            f"LOAD {literal(extension_file('ducklake'))};\n"
            + remote
            + f"ATTACH {literal(PREFIX + self.catalog)} AS {ALIAS} ({self.attach_options(True)});\n"
            f"USE {ALIAS};\n"
        )

    def copy_from_file(self, path: str) -> Iterator[tuple[str, str, int]]:
        """Every table of the DuckDB file ``path`` (a warehouse an earlier version made) copied into this lake,
        one transaction per table; a table the lake already has is left as it is. Yields (schema, table, rows
        copied or -1 when skipped)."""
        with self.connect() as con:
            con.execute(f"ATTACH {literal(path)} AS old (READ_ONLY)")
            try:
                tables = con.execute(
                    "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'old' "
                    "ORDER BY schema_name, table_name"
                ).fetchall()
                have = {
                    (s, t)
                    for s, t in con.execute(
                        f"SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = {literal(ALIAS)}"
                    ).fetchall()
                }
                for schema, table in tables:
                    if (schema, table) in have:
                        yield schema, table, -1
                        continue
                    target = f'{ALIAS}."{schema}"."{table}"'
                    con.execute(f'CREATE SCHEMA IF NOT EXISTS {ALIAS}."{schema}"')
                    con.execute(f'CREATE TABLE {target} AS SELECT * FROM old."{schema}"."{table}"')
                    (n,) = con.execute(f"SELECT count(*) FROM {target}").fetchone() or (0,)
                    yield schema, table, int(n)
            finally:
                con.execute("USE lake")
                con.execute("DETACH old")
        self.forget()

    def close(self) -> None:
        with self._lock:
            bases, self._bases, self._known = self._bases, {}, None
            self._cursors = Cursors(self._base, ALIAS)
        for base in bases.values():
            base.close()


class SqliteLake(LakeBackend):
    """The catalog in a SQLite file in WAL mode (readers never wait on a writer), with a busy timeout (a writer
    waits for another's commit instead of failing at once; a commit that still loses the race is retried)."""

    catalog_kind = "sqlite"

    def exists(self) -> bool:
        return Path(self.catalog.removeprefix("sqlite:")).exists()

    def _prepare(self) -> None:
        Path(self.catalog.removeprefix("sqlite:")).parent.mkdir(parents=True, exist_ok=True)
        if not objects.is_remote(self.data_path):  # s3://… is no folder here (a Path of it made ./s3:/…)
            Path(self.data_path).mkdir(parents=True, exist_ok=True)

    def _catalog_options(self) -> list[str]:
        return ["META_JOURNAL_MODE 'WAL'", "META_BUSY_TIMEOUT 10000"]

    def stored_files(self) -> list[Path]:
        catalog = Path(self.catalog.removeprefix("sqlite:"))
        beside = [Path(f"{catalog}{end}") for end in ("", "-wal")]
        return [p for p in beside if p.is_file()] + super().stored_files()


class PostgresLake(LakeBackend):
    """The catalog in PostgreSQL: many machines, the data on storage they all see."""

    catalog_kind = "postgres"

    def describe(self) -> str:
        return f"ducklake:postgres (data in {self.data_path})"  # a conninfo may hold a password


MISSING_FILE = re.compile(r'Cannot open file "([^"]+\.parquet)": No such file or directory')


def missing_file_hint(message: str) -> str | None:
    """The one line to say when a lake's data file is gone (its data folder was changed outside the pipeline),
    instead of DuckDB's IO error; None for any other error."""
    m = MISSING_FILE.search(message)
    if not m:
        return None
    return (
        f"the lake's data file {m.group(1)} is missing (its data folder was changed outside the pipeline): "
        "'eval-pipeline maintain --repair' drops the tables that lost files, then 'eval-pipeline run' rebuilds them"
    )


def failure_hint(message: str) -> str | None:
    """The one line to say instead of a storage error a person can act on (a lake data file gone, an object store
    that does not answer), else None."""
    return missing_file_hint(message) or objects.unanswered_hint(message)


def _moved_data(lake: str, asked: str, exc: BaseException) -> str:
    """The one line for a lake whose recorded data path is not the one asked for: both paths and the fix."""
    recorded = str(exc).split("in the catalog", 1)[-1].split('"')[1] if '"' in str(exc) else "?"
    return (
        f"the lake {lake} keeps its data in {recorded}, but EVAL_WAREHOUSE_DATA says {asked}: set "
        f"EVAL_WAREHOUSE_DATA={recorded} (or unset it when the files are beside the catalog), or move the files "
        "there"
    )


def lake_backend(spec: str, data_path: str | None = None) -> LakeBackend:
    """The DuckLake backend ``spec`` names (``ducklake:sqlite:<file>`` or ``ducklake:postgres:<conninfo>``)."""
    catalog = spec.removeprefix(PREFIX)
    if catalog.startswith("sqlite:"):
        path = Path(catalog.removeprefix("sqlite:")).expanduser().absolute()
        beside = str(path.with_name(path.name + ".files")) + "/"
        return SqliteLake(spec, f"sqlite:{path}", data_path or beside, data_beside=not data_path)
    if catalog.startswith("postgres:"):
        if not data_path:
            raise BackendError("a DuckLake with a PostgreSQL catalog needs EVAL_WAREHOUSE_DATA (where its rows go)")
        return PostgresLake(spec, catalog, data_path)
    raise BackendError(
        f"EVAL_WAREHOUSE {spec!r}: use ducklake:sqlite:<file>, ducklake:postgres:<conninfo> or a .duckdb path"
    )


@backend("ducklake", prefix=PREFIX)
def open_lake(spec: str, data_path: str | None, lock_timeout_s: float | None) -> LakeBackend:
    """A DuckLake (``ducklake:...``); a lake holds no lock anyone waits on."""
    return lake_backend(spec, data_path)
