"""Two warehouses compared table by table, row for row, the columns that differ from one run to the next left out
(run ids, clocks, durations): what the distributed profile's test and a person moving a project between
profiles check."""

from __future__ import annotations

import os

import pandas as pd

from eval_pipeline.storage.versions import VOLATILE
from eval_pipeline.storage.warehouse import Warehouse

# tables that log the runs themselves, a row per run: how many depends on the path taken (resumed steps, a run per
# pass), not on what was evaluated; and the pipeline's own bookkeeping of what it decided from (storage.versions)
RUN_LOGS = {"judge_usage", "partition_versions", "decision_inputs"}


def contents(wh: Warehouse, every_column: bool = False) -> dict[str, pd.DataFrame]:
    """Every table of ``wh`` (``schema.table``) but the runs' own logs (``RUN_LOGS``) with its lasting columns
    (``every_column``: all of them), rows in a canonical order."""
    out: dict[str, pd.DataFrame] = {}
    with wh.session() as s:
        for schema, table in sorted(s.tables()):
            if table in RUN_LOGS and not every_column:
                continue
            cols = [c for c in s.columns(schema, table) if every_column or not VOLATILE.search(c)]
            if not cols:
                continue
            quoted = ", ".join(f'"{c}"' for c in cols)
            df = s.query_df(f'SELECT {quoted} FROM "{schema}"."{table}"')
            df = df.astype(str).sort_values(cols, kind="stable").reset_index(drop=True)
            out[f"{schema}.{table}"] = df
    return out


def differences(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> list[str]:
    """What differs between two ``contents``: tables only one has, row counts, the first differing row."""
    out = [f"{t}: only in the first" for t in sorted(set(a) - set(b))]
    out += [f"{t}: only in the second" for t in sorted(set(b) - set(a))]
    for t in sorted(set(a) & set(b)):
        x, y = a[t], b[t]
        if list(x.columns) != list(y.columns):
            out.append(f"{t}: columns {sorted(set(x.columns) ^ set(y.columns))} differ")
        elif len(x) != len(y):
            out.append(f"{t}: {len(x)} rows vs {len(y)}")
        elif not x.equals(y):
            diff = (x != y).any(axis=1)
            i = int(diff.idxmax())
            cols = [c for c in x.columns if x.at[i, c] != y.at[i, c]]
            out.append(
                f"{t}: {int(diff.sum())} rows differ, e.g. row {i} in {cols[:5]}: "
                f"{[x.at[i, c] for c in cols[:3]]} vs {[y.at[i, c] for c in cols[:3]]}"
            )
    return out


def contents_under(spec: str, env: dict[str, str], drop: dict[str, list[str]] | None = None) -> dict[str, pd.DataFrame]:
    """``contents`` of the warehouse ``spec`` read with ``env`` as the whole environment (a cluster's store
    credentials, a project's data path), the test process's own restored after; ``drop``: columns left out per
    table (where a checkpoint lay, say)."""
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        out = contents(Warehouse(spec))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {t: df.drop(columns=(drop or {}).get(t, [])) for t, df in out.items()}
