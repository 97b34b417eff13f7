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


def _score_problems(rec: dict[str, str], rated: list[str], scales: dict) -> tuple[list[str], dict[str, float]]:
    """Each rated cell as a score on its scale; an empty cell is a missing rating."""
    problems, scores = [], {}
    for dim in rated:
        v = rec.get(dim, "")
        if v == "":
            continue
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
    return problems, scores


class _RatingsReader:
    """Reads one rubric's rating files for one checkpoint: every row read ends as ratings or in the quarantine."""

    def __init__(self, rubric: RubricConfig, checkpoint_id: str, sample_ids: set[str]):
        self.rubric, self.checkpoint_id, self.sample_ids = rubric, checkpoint_id, sample_ids
        self.now = datetime.now(timezone.utc).replace(tzinfo=None)
        self.scales = rubric.rating_scales
        self.aliases = {k.lower(): v for k, v in rubric.human_ratings.column_aliases.items()}
        self.out = RatingsLoad(pd.DataFrame(columns=RATING_COLUMNS), empty_quarantine())
        self.rows: list[dict] = []
        self.bad: list[dict] = []
        self.seen: set[tuple[str, str]] = set()

    def quarantine(self, file: str, line: int, raw: str, reason: str) -> None:
        self.bad.append(
            dict(
                rubric=self.rubric.name,
                checkpoint_id=self.checkpoint_id,
                source_file=file,
                line_number=line,
                stage="ratings",
                reason=reason,
                raw_line=raw,
                quarantined_at=self.now,
            )
        )

    def read_file(self, path: Path) -> None:
        text = _read_text(path)
        lines = text.splitlines()
        reader = csv.reader(io.StringIO(text), _dialect(text))
        try:
            header = next(reader)
        except StopIteration:
            self.out.problems.append(f"{path.name}: empty file")
            return
        self.out.files.append(path.name)
        cols = [self.aliases.get(h.strip().lower(), h.strip().lower()) for h in header]
        missing = [c for c in ("sample_id", "evaluator") if c not in cols]
        rated = [c for c in cols if c in self.scales]
        if not rated:
            missing.append("a column for at least one of " + ", ".join(self.scales))
        if missing:
            self._reject_file(path, lines, cols, text, missing)
            return
        for line_no, values in enumerate(reader, start=2):
            if any(v.strip() for v in values):
                raw = lines[line_no - 1] if line_no - 1 < len(lines) else ",".join(values)
                self.read_row(path, line_no, raw, values, cols, rated)

    def _reject_file(self, path: Path, lines: list[str], cols: list[str], text: str, missing: list[str]) -> None:
        reason = (
            f"file header lacks required column(s) {missing}; found {cols} "
            f"(delimiter detected: {_dialect(text).delimiter!r})"
        )
        self.out.problems.append(f"{path.name}: {reason}")
        # the header line always; its rows too when the file is named after this checkpoint
        self.quarantine(path.name, 1, lines[0] if lines else "", reason)
        if path.stem == self.checkpoint_id:
            for i, raw in enumerate(lines[1:], start=2):
                if raw.strip():
                    self.out.rows_read += 1
                    self.quarantine(path.name, i, raw, reason)

    def read_row(
        self, path: Path, line_no: int, raw: str, values: list[str], cols: list[str], rated: list[str]
    ) -> None:
        rec = dict(zip(cols, (v.strip() for v in values)))
        ckpt = rec.get("checkpoint") or ""
        if ("checkpoint" in cols and ckpt and ckpt != self.checkpoint_id) or (
            not ckpt and path.stem != self.checkpoint_id
        ):
            self.out.rows_other_checkpoints += 1
            return
        self.out.rows_read += 1
        if len(values) != len(cols):
            self.quarantine(path.name, line_no, raw, f"row has {len(values)} fields, header has {len(cols)}")
            return
        sid, evaluator = rec.get("sample_id", ""), rec.get("evaluator", "")
        try:
            check_evaluator(evaluator)
        except UnsafeIdentifierError as exc:
            self.quarantine(path.name, line_no, raw, str(exc))
            return
        if sid not in self.sample_ids:
            self.quarantine(path.name, line_no, raw, f"unknown sample id {sid!r} for checkpoint {self.checkpoint_id}")
            return
        problems, scores = _score_problems(rec, rated, self.scales)
        if problems:
            self.quarantine(path.name, line_no, raw, "; ".join(problems))
            return
        if (sid, evaluator) in self.seen:
            self.quarantine(path.name, line_no, raw, f"repeated rating of {sid!r} by {evaluator!r} (first kept)")
            return
        self.seen.add((sid, evaluator))
        self.rows += [
            dict(
                checkpoint_id=self.checkpoint_id,
                sample_id=sid,
                evaluator=evaluator,
                dimension=dim,
                score=x,
                source_file=path.name,
                line_number=line_no,
            )
            for dim, x in scores.items()
        ]

    def finish(self) -> RatingsLoad:
        out = self.out
        out.ratings = pd.DataFrame(self.rows, columns=RATING_COLUMNS).astype(
            {"score": "float64", "line_number": "int64"}
        )
        out.quarantine = pd.DataFrame(self.bad, columns=QUARANTINE_COLUMNS) if self.bad else empty_quarantine()
        return out


def load_ratings(
    rubric: RubricConfig, checkpoint_id: str, sample_ids: set[str], root: Path | None = None
) -> RatingsLoad:
    """This checkpoint's ratings from the rubric's rating folder, validated (see the module's docstring)."""
    folder = (root or settings.ratings_dir()) / rubric.name
    reader = _RatingsReader(rubric, checkpoint_id, sample_ids)
    if folder.is_dir():
        for path in sorted(folder.glob("*.csv")):
            reader.read_file(path)
    return reader.finish()
