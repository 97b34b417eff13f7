"""What each checkpoint's rows are, as short content versions, so that what spans checkpoints is decided again only
for the checkpoints whose inputs' content changed (defs/assets/decisions.py).

Three tables in ``main``:

- ``partition_versions`` (``schema_name``, ``name``, ``checkpoint_id``, ``version``): the content version of one
  checkpoint's rows of one table of a rubric (``name``: the table, or ``quarantine_<stage>`` for its rows of
  ``main.quarantine``), written by the asset that wrote them, right after them (defs/asset.py). A version is
  ``<rows>:<sum of row hashes>`` over the columns that are not the run's own (``VOLATILE``: run ids, clocks,
  durations), so rows written again unchanged keep their version, whatever the order DuckDB returns them in.
- ``decision_inputs`` (``schema_name``, ``asset``, ``checkpoint_id``, ``fingerprint``): what each decision asset last
  decided a checkpoint from, written in the transaction that writes the decision.

- ``pooled_trust`` (``schema_name``, ``judge_identity``, ``fingerprint``, ``payload``): a judge identity's pooled
  trust (agreement.trust.PooledTrust, as JSON) and the fingerprint of what it was computed from (the pool's
  content, the identity): a checkpoint landing with the pool unchanged takes it from here instead of computing
  the agreement over every rated sample again.

All are small (a row per checkpoint and table, or per judge) and read whole in one query per rubric.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from eval_pipeline.core.contracts import QUARANTINE, Table
from eval_pipeline.storage.tables import quote_ident
from eval_pipeline.storage.warehouse import Warehouse

# columns whose values belong to the run that wrote them, not to what was evaluated
VOLATILE = re.compile(
    r"(^run_id$|run_ids?$|_at$|^at$|_time$|^time$|timestamp|wall_s|latency|_ms$|seconds|elapsed|^pid$|^host$|"
    r"snapshot|^read_at$|^fingerprint$)"
)
VERSIONS = ("main", "partition_versions")
DECISIONS = ("main", "decision_inputs")
POOLED = ("main", "pooled_trust")
ABSENT = "0:0"  # no rows


def lasting_columns(columns: Iterable[str], skip: Sequence[str] = ("checkpoint_id",)) -> list[str]:
    """The columns of a table that say what was evaluated (not the run's own, not ``skip``)."""
    return [c for c in columns if c not in skip and not VOLATILE.search(c)]


def content_versions(
    wh: Warehouse, schema: str, table: str, checkpoint_ids: Sequence[str], equal: Mapping[str, object] | None = None
) -> dict[str, str]:
    """Each checkpoint's content version of ``schema.table`` (its rows matching ``equal``), in one query;
    ``ABSENT`` for a checkpoint with no rows or a table nobody made."""
    out = dict.fromkeys(checkpoint_ids, ABSENT)
    if not checkpoint_ids or not wh.table_exists(schema, table):
        return out
    skip = ("checkpoint_id", *(equal or {}))
    cols = lasting_columns(wh.columns(schema, table), skip)
    if not cols:
        return out
    hashed = ", ".join(quote_ident(c) for c in cols)
    where = " AND ".join(f"{quote_ident(c)} = ?" for c in (equal or {}))
    marks = ", ".join("?" for _ in checkpoint_ids)
    sql = (
        f"SELECT checkpoint_id, count(*), sum(hash({hashed})::HUGEINT)::VARCHAR FROM "
        f"{quote_ident(schema)}.{quote_ident(table)} WHERE checkpoint_id IN ({marks})"
        + (f" AND {where}" if where else "")
        + " GROUP BY checkpoint_id"
    )
    for ckpt, n, h in wh.query_rows(sql, [*checkpoint_ids, *(equal or {}).values()]):
        out[str(ckpt)] = f"{int(n)}:{h}"
    return out


VERSION_COLUMNS = ["schema_name", "name", "checkpoint_id", "version"]
DECISION_COLUMNS = ["schema_name", "asset", "checkpoint_id", "fingerprint"]
POOLED_COLUMNS = ["schema_name", "judge_identity", "fingerprint", "payload"]


def bookkeeping(wh: Warehouse) -> None:
    """The three tables made, kept small where the backend can (``keep_small``: no file a write on a DuckLake)."""
    for (schema, table), cols in ((VERSIONS, VERSION_COLUMNS), (DECISIONS, DECISION_COLUMNS), (POOLED, POOLED_COLUMNS)):
        if not wh.table_exists(schema, table):
            empty = pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
            wh.replace_partitions([(schema, table, {"schema_name": ""}, [empty])])
            wh.backend.keep_small(schema, table)


def record(wh: Warehouse, schema: str, versions: Mapping[str, Mapping[str, str]]) -> None:
    """Store ``versions`` (name -> checkpoint -> version) of one rubric, in one transaction."""
    rows = [(schema, name, c, v) for name, by in versions.items() for c, v in by.items()]
    if not rows:
        return
    bookkeeping(wh)
    df = pd.DataFrame(rows, columns=VERSION_COLUMNS)
    wh.upsert_rows(*VERSIONS, df, key=("schema_name", "name", "checkpoint_id"))


def read_versions(wh: Warehouse, schema: str) -> dict[tuple[str, str], str]:
    """(name, checkpoint) -> version of every table of one rubric."""
    if not wh.table_exists(*VERSIONS):
        return {}
    rows = wh.read(*VERSIONS, columns=("name", "checkpoint_id", "version"), where={"schema_name": schema})
    return {(str(n), str(c)): str(v) for n, c, v in zip(rows.name, rows.checkpoint_id, rows.version)}


def read_decided(wh: Warehouse, schema: str) -> dict[tuple[str, str], str]:
    """(asset, checkpoint) -> the fingerprint of what it was last decided from."""
    if not wh.table_exists(*DECISIONS):
        return {}
    rows = wh.read(*DECISIONS, columns=("asset", "checkpoint_id", "fingerprint"), where={"schema_name": schema})
    return {(str(a), str(c)): str(f) for a, c, f in zip(rows.asset, rows.checkpoint_id, rows.fingerprint)}


def read_pooled(wh: Warehouse, schema: str) -> dict[str, tuple[str, str]]:
    """judge identity -> (fingerprint, payload) of its stored pooled trust."""
    if not wh.table_exists(*POOLED):
        return {}
    rows = wh.read(*POOLED, columns=("judge_identity", "fingerprint", "payload"), where={"schema_name": schema})
    return {str(i): (str(f), str(p)) for i, f, p in zip(rows.judge_identity, rows.fingerprint, rows.payload)}


def pooled_rows(schema: str, stored: Mapping[str, tuple[str, str]]) -> pd.DataFrame:
    """The ``pooled_trust`` rows of one rubric's identities (identity -> (fingerprint, payload))."""
    return pd.DataFrame([(schema, i, f, p) for i, (f, p) in stored.items()], columns=POOLED_COLUMNS)


def decided_rows(schema: str, asset: str, fingerprints: Mapping[str, str]) -> pd.DataFrame:
    """The ``decision_inputs`` rows of one decision asset's checkpoints."""
    return pd.DataFrame([(schema, asset, c, f) for c, f in fingerprints.items()], columns=DECISION_COLUMNS)


def fingerprint(*parts: object) -> str:
    """A short stable digest of ``parts`` (their ``repr``)."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:20]


def frame_version(df: pd.DataFrame | None) -> str:
    """A content version of a frame (its lasting columns, its rows in any order)."""
    if df is None or df.empty:
        return ABSENT
    cols = sorted(lasting_columns(df.columns, ()))
    hashed = pd.util.hash_pandas_object(df[cols].astype(str), index=False)
    return f"{len(df)}:{int(hashed.astype('uint64').sum())}"


# what a checkpoint's own (partitioned) assets write, by the names their versions are recorded under (defs/asset.py)
OWN_TABLES = (
    Table.RAW_OUTPUTS, Table.IMPORTED_SCORES, Table.SAMPLES, Table.EXTRACTIONS, Table.METRICS, Table.JUDGE_SCORES,
    Table.JUDGE_IDENTITY,
    Table.JUDGE_CALIBRATION, Table.JUDGE_REPEATABILITY, Table.SCORES, Table.SUMMARY, Table.HUMAN_RATINGS,
)  # fmt: skip
QUARANTINE_STAGES = ("validate", "ratings")
COMPLETE = ("_every_checkpoint_recorded", "*")  # the mark: every checkpoint written has its versions


def record_missing(wh: Warehouse, schema: str) -> list[str]:
    """Once per rubric: the versions of the checkpoints written before versions were recorded (a warehouse of an
    earlier version of the pipeline), worked out from their rows now, then the mark that all are recorded. The
    checkpoints it recorded (none on every later call: one small read)."""
    known = read_versions(wh, schema)
    if COMPLETE in known or not wh.table_exists(schema, Table.SCORES):
        return []
    have = {c for (name, c) in known if name == Table.SCORES}
    found = wh.read(schema, Table.SCORES, columns=("checkpoint_id",), distinct=True)
    missing = sorted({str(c) for c in found.checkpoint_id} - have)
    out: dict[str, dict[str, str]] = {}
    if missing:
        for table in OWN_TABLES:
            if wh.table_exists(schema, table):
                out[table] = content_versions(wh, schema, table, missing)
        for stage in QUARANTINE_STAGES:
            equal = {"rubric": schema, "stage": stage}
            out[f"quarantine_{stage}"] = content_versions(wh, *QUARANTINE, missing, equal)
    out[COMPLETE[0]] = {COMPLETE[1]: "1"}
    record(wh, schema, out)
    return missing
