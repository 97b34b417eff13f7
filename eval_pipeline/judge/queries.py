"""The judge layer's SQL: reads of the judge cache (``main.judge_cache``) as typed functions
(tests/house/test_sql_placement.py keeps SQL here or in storage/)."""

from __future__ import annotations

import pandas as pd

from eval_pipeline.storage.warehouse import Warehouse


def cached_answers(wh: Warehouse, keys: list[str], columns: dict[str, str]) -> pd.DataFrame:
    """The cached answers of ``keys`` (``columns``: the cache table's, as the catalog has them): key, answer text,
    tokens, latency, whether the answer is usable and why not, token log probabilities. ``usable`` is False for a
    final answer the judge gave that could not be used (a re-run reproduces the missing score instead of asking
    again); caches written before the column existed hold usable answers only."""
    extra = ", coalesce(usable, TRUE) AS usable, reason" if "usable" in columns else ", TRUE AS usable, NULL AS reason"
    extra += ", logprobs" if "logprobs" in columns else ", NULL AS logprobs"
    return wh.query_df(
        f"SELECT cache_key, answer_text, prompt_tokens, completion_tokens, latency_ms{extra} FROM main.judge_cache "
        "WHERE list_contains(?, cache_key)",
        [keys],
    )
