"""The judge cache (`main.judge_cache`): one row per answered prompt.

The key is the SHA-256 of the judge model, its sampling parameters, the rubric's
judge version (the hash of everything in the rubric the judge sees) and the full prompt, so a re-run, a backfill or a new checkpoint that
repeats a sample makes no repeated call, and a rubric edit changes every key.
Only parseable answers are cached: transport failures and unparseable answers
are asked again on the next run. Reads happen before the calls and writes after
them, so no connection is held while waiting on the endpoint.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from eval_pipeline.warehouse import Warehouse

TABLE = ("main", "judge_cache")


def cache_key(params: dict[str, Any], rubric_version: str, messages: list[dict[str, str]], schema: dict | None) -> str:
    blob = json.dumps(
        {"params": params, "rubric_version": rubric_version, "messages": messages, "schema": schema},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def lookup(wh: Warehouse, keys: list[str]) -> dict[str, dict[str, Any]]:
    if not keys or not wh.table_exists(*TABLE):
        return {}
    df = wh.query_df(
        "SELECT cache_key, answer_text, prompt_tokens, completion_tokens, latency_ms FROM main.judge_cache "
        "WHERE list_contains(?, cache_key)",
        [list(set(keys))],
    )
    return {r.cache_key: r._asdict() for r in df.itertuples(index=False)}


def store(wh: Warehouse, rows: list[dict[str, Any]]) -> int:
    if not rows:
        return 0
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    df = pd.DataFrame(rows)
    df["created_at"] = now
    return wh.upsert_rows(*TABLE, df, key=["cache_key"])
