"""Human ratings in: `data/human_ratings/<rubric>/*.csv`, validated like samples.

Columns: `sample_id`, `evaluator`, one column per rated dimension, optional
`checkpoint` and `notes` (the rubric may alias columns, so the answer-quality
document's recording template loads as it is). The delimiter is detected
(comma, semicolon, tab, pipe). A row applies to a checkpoint through its
`checkpoint` column, or, without one, when the file is named after the
checkpoint. Unknown sample ids, scores off the scale, unsafe evaluator names and
a repeated (sample, evaluator) pair go to the quarantine with the reason; a file
without the required columns quarantines all its rows and says which are missing.
Ratings from other sources (another team's judge) load the same way, the source
named as evaluator. An empty cell is a missing rating, not an error.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from eval_pipeline.core import settings
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import RATING_COLUMNS
from eval_pipeline.core.ids import UnsafeIdentifierError, check_evaluator
from eval_pipeline.ingest.validation import QUARANTINE_COLUMNS, empty_quarantine


@dataclass
class RatingsLoad:
    ratings: pd.DataFrame
    quarantine: pd.DataFrame
    rows_read: int = 0
    rows_other_checkpoints: int = 0
    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _read_text(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="backslashreplace")


def _dialect(sample: str) -> csv.Dialect | type[csv.Dialect]:
    try:
        return csv.Sniffer().sniff(sample.split("\n", 1)[0] + "\n", delimiters=",;\t|")
    except csv.Error:
        return csv.excel


def load_ratings(
    rubric: RubricConfig, checkpoint_id: str, sample_ids: set[str], root: Path | None = None
) -> RatingsLoad:
    folder = (root or settings.ratings_dir()) / rubric.name
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    scales = rubric.rating_scales
    aliases = {k.lower(): v for k, v in rubric.human_ratings.column_aliases.items()}
    out = RatingsLoad(pd.DataFrame(columns=RATING_COLUMNS), empty_quarantine())
    rows: list[dict] = []
    bad: list[dict] = []
    seen: set[tuple[str, str]] = set()

    def quarantine(file: str, line: int, raw: str, reason: str) -> None:
        bad.append(
            dict(
                rubric=rubric.name,
                checkpoint_id=checkpoint_id,
                source_file=file,
                line_number=line,
                stage="ratings",
                reason=reason,
                raw_line=raw,
                quarantined_at=now,
            )
        )

    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.csv")):
        text = _read_text(path)
        lines = text.splitlines()
        reader = csv.reader(io.StringIO(text), _dialect(text))
        try:
            header = next(reader)
        except StopIteration:
            out.problems.append(f"{path.name}: empty file")
            continue
        out.files.append(path.name)
        cols = [aliases.get(h.strip().lower(), h.strip().lower()) for h in header]
        missing = [c for c in ("sample_id", "evaluator") if c not in cols]
        rated = [c for c in cols if c in scales]
        if not rated:
            missing.append("a column for at least one of " + ", ".join(scales))
        has_ckpt = "checkpoint" in cols
        if missing:
            reason = (
                f"file header lacks required column(s) {missing}; found {cols} "
                f"(delimiter detected: {_dialect(text).delimiter!r})"
            )
            out.problems.append(f"{path.name}: {reason}")
            # the header line always; its rows too when the file is named after this checkpoint
            quarantine(path.name, 1, lines[0] if lines else "", reason)
            if path.stem == checkpoint_id:
                for i, raw in enumerate(lines[1:], start=2):
                    if raw.strip():
                        out.rows_read += 1
                        quarantine(path.name, i, raw, reason)
            continue
        for line_no, values in enumerate(reader, start=2):
            if not any(v.strip() for v in values):
                continue
            raw = lines[line_no - 1] if line_no - 1 < len(lines) else ",".join(values)
            rec = dict(zip(cols, (v.strip() for v in values)))
            ckpt = rec.get("checkpoint") or ""
            if (has_ckpt and ckpt and ckpt != checkpoint_id) or (not ckpt and path.stem != checkpoint_id):
                out.rows_other_checkpoints += 1
                continue
            out.rows_read += 1
            if len(values) != len(cols):
                quarantine(path.name, line_no, raw, f"row has {len(values)} fields, header has {len(cols)}")
                continue
            sid, evaluator = rec.get("sample_id", ""), rec.get("evaluator", "")
            try:
                check_evaluator(evaluator)
            except UnsafeIdentifierError as exc:
                quarantine(path.name, line_no, raw, str(exc))
                continue
            if sid not in sample_ids:
                quarantine(path.name, line_no, raw, f"unknown sample id {sid!r} for checkpoint {checkpoint_id}")
                continue
            problems, scores = [], {}
            for dim in rated:
                v = rec.get(dim, "")
                if v == "":
                    continue  # a missing rating
                try:
                    x = float(v)
                except ValueError:
                    problems.append(f"{dim} {v!r} is not a number")
                    continue
                sc = scales[dim]
                if not math.isfinite(x) or not x.is_integer() or not sc.min <= x <= sc.max:
                    problems.append(f"{dim} {v!r} is off the scale {sc.min}-{sc.max}")
                    continue
                scores[dim] = x
            if problems:
                quarantine(path.name, line_no, raw, "; ".join(problems))
                continue
            if (sid, evaluator) in seen:
                quarantine(path.name, line_no, raw, f"repeated rating of {sid!r} by {evaluator!r} (first kept)")
                continue
            seen.add((sid, evaluator))
            for dim, x in scores.items():
                rows.append(
                    dict(
                        checkpoint_id=checkpoint_id,
                        sample_id=sid,
                        evaluator=evaluator,
                        dimension=dim,
                        score=x,
                        source_file=path.name,
                        line_number=line_no,
                    )
                )
    out.ratings = pd.DataFrame(rows, columns=RATING_COLUMNS).astype({"score": "float64", "line_number": "int64"})
    out.quarantine = pd.DataFrame(bad, columns=QUARANTINE_COLUMNS) if bad else empty_quarantine()
    return out
