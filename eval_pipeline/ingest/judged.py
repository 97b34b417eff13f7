"""Scores from a judge a team already ran, brought with a checkpoint (#75): ``<checkpoint>/<rubric>.judge.json``.

The file says who judged (``model``, ``prompt``: its name or version, ``date``) and each sample's scores
(``scores``: sample id -> dimension key or questionnaire item id -> score). ``eval-pipeline import`` writes it from
a mapping's ``judge`` section; a team may write it by hand. The ``raw_outputs`` step copies it into
``<rubric>.imported_scores``, one row a sample and dimension: a score on the dimension's scale is kept; a cell that
is not one (text, out of the scale, absent) is kept as missing with its reason, and costs only itself. The
``imported`` judge backend (``EVAL_JUDGE=imported``) scores from those rows, under that judge's identity.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from eval_pipeline.core.types import JSONObject
from eval_pipeline.ingest.checkpoints import CheckpointError

if TYPE_CHECKING:
    from eval_pipeline.core.config import RubricConfig

COLUMNS = ["checkpoint_id", "sample_id", "dimension", "value", "score", "reason", "judge_model", "judge_prompt",
           "judged_at"]  # fmt: skip
MAX_BYTES = 1 << 30
TYPES = {c: "string" for c in COLUMNS} | {"score": "float64"}  # text typed even when every value is absent


def scales(rubric: RubricConfig) -> dict[str, tuple[int, int]]:
    """What an imported judge may score: each judged dimension and questionnaire item, with its scale's ends."""
    out = {d.key: (rubric.scale_of(d).min, rubric.scale_of(d).max) for d in rubric.judged_dimensions}
    q = rubric.questionnaire
    if q is not None:
        out |= {i.id: (q.scale.min, q.scale.max) for m in q.metrics for i in m.items}
    return out


def _score(value: Any, low: int, high: int) -> tuple[float | None, str | None]:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, "the imported judge gave no score"
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        return None, f"the imported score {str(value)[:40]!r} is not a number"
    if not math.isfinite(number):
        return None, f"the imported score {str(value)[:40]!r} is not a number"
    if not low <= number <= high:
        return None, f"the imported score {number:g} is outside the scale {low}-{high}"
    return number, None


def empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in TYPES.items()})


def read_judged(path: Path, rubric: RubricConfig, checkpoint_id: str) -> pd.DataFrame:
    """The file's rows (``COLUMNS``): every sample it scores and every dimension and item the rubric's judge
    scores (``scales``), each a score or missing with its reason. A file that cannot be read at all is a
    CheckpointError naming it."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise CheckpointError(f"{path}: larger than {MAX_BYTES} bytes")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: cannot be read as an imported judge's scores: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("scores"), dict):
        raise CheckpointError(f"{path}: not an imported judge's scores (keys: model, prompt, date, scores)")
    who = {k: data.get(k) for k in ("model", "prompt")}
    for key, value in who.items():
        if not isinstance(value, str) or not value.strip():
            raise CheckpointError(f"{path}: '{key}' must say who judged (a non-empty text)")
    date = data.get("date")
    given: JSONObject = data["scores"]
    rows = []
    for sid, cells in given.items():
        cells = cells if isinstance(cells, dict) else {}
        for dim, (low, high) in scales(rubric).items():
            value = cells.get(dim)
            score, reason = _score(value, low, high)
            rows.append([checkpoint_id, sid, dim, None if value is None else json.dumps(value), score, reason,
                         who["model"], who["prompt"], None if date is None else str(date)])  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS).astype(TYPES) if rows else empty()
