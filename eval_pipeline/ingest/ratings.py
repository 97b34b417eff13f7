"""Human ratings in: `data/human_ratings/<rubric>/*.csv`, validated like samples.

Columns: `sample_id`, `evaluator`, one column per rated dimension, optional
`checkpoint` and `notes` (the rubric may alias columns, so the answer-quality
document's recording template loads as it is). The delimiter is detected
(comma, semicolon, tab, pipe). A row applies to a checkpoint through its
`checkpoint` column, or, without one, when the file is named after the
checkpoint. Unknown sample ids, unsafe evaluator names and a repeated (sample,
evaluator) pair send the row to the quarantine with the reason; a score that is
not a number on its scale costs only its cell: the cell is quarantined (line,
column, value, why) and the row's other ratings are kept, unless none is left. A
file without the required columns quarantines all its rows and says which are missing.
Ratings from other sources (another team's judge, a paper's published LLM scores) load the
same way, the source named as evaluator, with `rater_kind` = `model` (a column, or the
rubric's `human_ratings.model_raters`); only humans count as humans in `human_mean` and the
reliability gate. An empty cell is a missing rating, not an error.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from eval_pipeline.core import settings
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import (
    BAD_CELL_ONLY,
    QUARANTINE_COLUMNS,
    RATED_AT,
    RATER_KINDS,
    RATING_COLUMNS,
    UNPLACED,
    UNRATED,
    Table,
)
from eval_pipeline.core.ids import UnsafeIdentifierError, check_evaluator
from eval_pipeline.core.types import Record, Row
from eval_pipeline.ingest.files import not_a_file
from eval_pipeline.storage.versions import read_versions
from eval_pipeline.storage.warehouse import Warehouse


def empty_quarantine() -> pd.DataFrame:
    """A quarantine frame with no rows but the table's real types (so a new table gets them)."""
    return pd.DataFrame(
        {
            "rubric": pd.Series(dtype="object"),
            "checkpoint_id": pd.Series(dtype="object"),
            "source_file": pd.Series(dtype="object"),
            "line_number": pd.Series(dtype="int64"),
            "stage": pd.Series(dtype="object"),
            "reason": pd.Series(dtype="object"),
            "raw_line": pd.Series(dtype="object"),
            "quarantined_at": pd.Series(dtype="datetime64[ns]"),
        }
    )


@dataclass
class RatingsLoad:
    ratings: pd.DataFrame
    quarantine: pd.DataFrame
    rows_read: int = 0
    rows_other_checkpoints: int = 0
    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _read_text(path: Path) -> tuple[str, set[int]]:
    """The file's text (a byte-order mark dropped) and the numbers of the lines that are not valid UTF-8 (shown
    with their bad bytes escaped; the rows on them are quarantined, never read as ratings)."""
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    bad = set()
    for i, line in enumerate(raw.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            bad.add(i)
    return raw.decode("utf-8", errors="backslashreplace"), bad


class _Dialect(csv.excel):
    """CSV as spreadsheets write it ("" inside a quoted cell is one quote); only the delimiter is detected."""


def _dialect(sample: str) -> type[csv.Dialect]:
    first = sample.split("\n", 1)[0]
    counts = {d: first.count(d) for d in (",", ";", "\t", "|")}
    delimiter = max(counts, key=lambda d: counts[d]) if any(counts.values()) else ","
    return type("Detected", (_Dialect,), {"delimiter": delimiter})


# Columns a rating file may carry besides the rubric's dimensions.
KNOWN_COLUMNS = ("sample_id", "evaluator", "checkpoint", "notes", "rater_kind", RATED_AT)


def _rated_at(cell: str) -> tuple[pd.Timestamp | None, str | None]:
    """A ``rated_at`` cell as a UTC moment (a moment without a zone is taken as UTC), or the problem with it; a
    blank cell is no moment and no problem (such ratings are decided as they stand, not held: agreement.trust)."""
    if not cell:
        return None, None
    try:
        at = pd.Timestamp(cell)
    except (ValueError, TypeError, OverflowError):
        at = None
    if at is None or at is pd.NaT:
        return None, f"rated_at {cell[:40]!r} is not a date and time (ISO 8601, e.g. 2026-12-06T14:00:00Z)"
    return (at.tz_localize("UTC") if at.tzinfo is None else at.tz_convert("UTC")), None


def _checkpoint_of(cell: str, checkpoint_id: str) -> str:
    """'this' when the cell names this checkpoint, 'case' when it does but for letter case, else 'other'."""
    if cell == checkpoint_id:
        return "this"
    return "case" if cell.casefold() == checkpoint_id.casefold() else "other"


_ASCII_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")


def _score_problems(rec: dict[str, str], rated: list[str], scales: Record) -> tuple[list[str], dict[str, float]]:
    """Each rated cell as a score on its scale; an empty cell is a missing rating."""
    problems, scores = [], {}
    for dim in rated:
        v = rec.get(dim, "")
        if v == "":
            continue
        if not _ASCII_NUMBER.fullmatch(v):  # float() also reads Arabic-Indic and full-width digits
            problems.append(f"{dim} {v!r} is not a number written with the digits 0-9")
            continue
        x = float(v)
        sc = scales[dim]
        if not math.isfinite(x) or not x.is_integer() or not sc.min <= x <= sc.max:
            problems.append(f"{dim} {v!r} is off the scale {sc.min}-{sc.max}")
            continue
        scores[dim] = x
    return problems, scores


class _RatingsReader:
    """Reads one rubric's rating files for one checkpoint: every row read ends as ratings or in the quarantine."""

    def __init__(self, rubric: RubricConfig, checkpoint_id: str, sample_ids: set[str], known: set[str] | None = None):
        self.rubric, self.checkpoint_id, self.sample_ids, self.known = rubric, checkpoint_id, sample_ids, known
        self.now = datetime.now(timezone.utc).replace(tzinfo=None)
        self.scales = rubric.rating_scales
        self.aliases = {k.lower(): v for k, v in rubric.human_ratings.column_aliases.items()}
        self.out = RatingsLoad(pd.DataFrame(columns=RATING_COLUMNS), empty_quarantine())
        self.rows: list[Row] = []
        self.bad: list[Row] = []
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
        text, bad_lines = _read_text(path)
        lines = text.split("\n")
        dialect = _dialect(text)
        reader = csv.reader(io.StringIO(text, newline=""), dialect)
        try:
            header = next(reader)
        except StopIteration:
            self.out.problems.append(f"{path.name}: empty file")
            return
        except csv.Error as exc:
            self._reject_file(path, lines, [], dialect.delimiter, f"an unreadable header ({exc})")
            return
        self.out.files.append(path.name)
        cols = [self.aliases.get(h.strip().lower(), h.strip().lower()) for h in header]
        problem = self._header_problem(cols)
        if problem:
            self._reject_file(path, lines, cols, dialect.delimiter, problem)
            return
        self._note_unknown_columns(path, cols)
        rated = [c for c in cols if c in self.scales]
        start, offset = reader.line_num + 1, 0
        while start <= len(lines):
            try:
                values = next(reader)
                end = offset + reader.line_num  # a quoted cell may span lines: the record is lines start..end
            except StopIteration:
                break
            except csv.Error as exc:
                values, end = [], start
                reason: str | None = f"unreadable CSV: {exc}"
            else:
                reason = self._swallowed(lines, start, end, dialect, len(cols)) if end > start else None
            if reason:
                # only the line the broken record starts on is lost; reading resumes on the next line, so a quote
                # never closed cannot take the rows after it with it
                self.out.rows_read += 1
                self.quarantine(path.name, start, lines[start - 1].rstrip("\r"), reason)
                start, offset = start + 1, start
                reader = csv.reader(io.StringIO("\n".join(lines[offset:]), newline=""), dialect)
                continue
            raw = "\n".join(lines[start - 1 : end]).rstrip("\r")
            if any(v.strip() for v in values):
                if bad_lines & set(range(start, end + 1)):
                    self.out.rows_read += 1
                    self.quarantine(path.name, start, raw, "not valid UTF-8 (bad bytes shown escaped)")
                else:
                    self.read_row(path, start, raw, values, cols, rated)
            start = end + 1

    def _header_problem(self, cols: list[str]) -> str | None:
        """Why no row of a file with this header can be read, or None."""
        missing = [c for c in ("sample_id", "evaluator") if c not in cols]
        if not any(c in self.scales for c in cols):
            missing.append("a column for at least one of " + ", ".join(self.scales))
        if missing:
            return f"file header lacks required column(s) {missing}"
        repeated = sorted(c for c, n in Counter(cols).items() if c and n > 1)
        if repeated:
            return f"file header names {repeated} more than once (which value is the rating cannot be told)"
        close = self._misspelt(cols)
        if close:
            return "file header has " + "; ".join(close) + ": rename the column (a rating in it would be lost)"
        return None

    def _misspelt(self, cols: list[str]) -> list[str]:
        """Unknown columns that look like a misspelt dimension or required column."""
        from rapidfuzz import fuzz

        known = [*self.scales, *KNOWN_COLUMNS]
        found = []
        for c in cols:
            if c and c not in known and c not in self.aliases.values():
                best = max(known, key=lambda k: fuzz.ratio(c, k))
                if fuzz.ratio(c, best) >= 80:
                    found.append(f"{c!r} (did you mean {best!r}?)")
        return found

    def _note_unknown_columns(self, path: Path, cols: list[str]) -> None:
        # read_<field>: what a ratings template shows the rater (the sample's text), never read as a rating
        unknown = [c for c in cols if c not in self.scales and c not in KNOWN_COLUMNS and not c.startswith("read_")]
        if unknown:
            self.out.problems.append(f"{path.name}: columns {unknown} are not read (not a dimension of this rubric)")

    @staticmethod
    def _swallowed(lines: list[str], start: int, end: int, dialect: type[csv.Dialect], width: int) -> str | None:
        """Why a record spanning lines start..end is a quote left open rather than a cell with line breaks: a
        line inside it reads, on its own, as a whole row of the header's width (or the record runs to the end of
        the file without its quote closed)."""
        for i in range(start + 1, end + 1):
            line = lines[i - 1]
            try:
                fields = next(csv.reader([line], dialect), [])
            except csv.Error:
                continue
            if len(fields) == width:
                return f"a quote opened on line {start} is not closed before line {i}, which reads as a row of its own"
        if end >= len(lines) - 1 and "\n".join(lines[start - 1 : end]).count('"') % 2:
            return f"a quote opened on line {start} is never closed"
        return None

    def names_others_only(self, path: Path, text: str) -> bool:
        """Whether a file refused whole holds another checkpoint's ratings and not this one's: its name or text
        names known checkpoints, this one not among them. A file that names none could be anyone's: it counts
        against every checkpoint (nothing is dropped unseen)."""
        if self.known is None:
            return False
        where = f"{path.stem}\n{text}"
        named = {c for c in self.known if re.search(rf"(?<![A-Za-z0-9]){re.escape(c)}(?![A-Za-z0-9])", where)}
        return bool(named) and self.checkpoint_id not in named

    def _reject_file(self, path: Path, lines: list[str], cols: list[str], delimiter: str, problem: str) -> None:
        reason = f"{problem}; found {cols} (delimiter detected: {delimiter!r})"
        self.out.problems.append(f"{path.name}: {reason}")
        if self.names_others_only(path, "\n".join(lines)):
            return  # another checkpoint's file: refused there, not here
        # the header line, and every row: which checkpoint a row rates cannot be read, so none is dropped unseen
        self.quarantine(path.name, 1, lines[0] if lines else "", reason)
        for i, raw in enumerate(lines[1:], start=2):
            if raw.strip():
                self.out.rows_read += 1
                self.quarantine(path.name, i, raw, reason)

    def _placement(self, cell: str, path: Path, has_column: bool) -> str:
        """'this' when a row rates this checkpoint, 'other' when it rates another known one, else why it cannot
        be placed (such a row is quarantined in every checkpoint's run, so it is never dropped unseen)."""
        named, how = (cell, f"checkpoint {cell!r}") if cell else (path.stem, f"file name {path.name!r}")
        which = _checkpoint_of(named, self.checkpoint_id)
        if which != "other":
            return which if which == "this" else f"{how} differs from {self.checkpoint_id!r} only in letter case"
        if self.known is None and (cell or has_column):
            return "other"
        if self.known is not None and named in self.known:
            return "other"
        if cell:
            return f"{UNPLACED}checkpoint {cell!r} names no known checkpoint"
        if has_column:
            return f"{UNPLACED}the checkpoint cell is blank and the file name {path.name!r} names no known checkpoint"
        return (
            f"{UNPLACED}no checkpoint for this row: give a checkpoint column "
            f"or name the file <checkpoint>.csv (it is {path.name!r})"
        )

    def read_row(
        self, path: Path, line_no: int, raw: str, values: list[str], cols: list[str], rated: list[str]
    ) -> None:
        rec = dict(zip(cols, (v.strip() for v in values)))
        place = self._placement(rec.get("checkpoint") or "", path, "checkpoint" in cols)
        if place == "other":
            self.out.rows_other_checkpoints += 1  # read again, and kept, when that checkpoint is evaluated
            return
        if place != "this":
            self.out.rows_read += 1
            self.quarantine(path.name, line_no, raw, place)
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
        if not scores:  # nothing on the row to keep: the row is quarantined whole, with every cell's reason
            reason = "; ".join(problems) or f"{UNRATED}no score in any rated column ({', '.join(rated)})"
            self.quarantine(path.name, line_no, raw, reason)
            return
        kind = (rec.get("rater_kind") or "").lower() or (
            "model" if evaluator in self.rubric.human_ratings.model_raters else "human"
        )
        if kind not in RATER_KINDS:
            self.quarantine(path.name, line_no, raw, f"rater_kind {rec.get('rater_kind')!r}: use human or model")
            return
        if (sid, evaluator) in self.seen:
            self.quarantine(path.name, line_no, raw, f"repeated rating of {sid!r} by {evaluator!r} (first kept)")
            return
        self.seen.add((sid, evaluator))
        at, late = _rated_at(rec.get(RATED_AT) or "")
        problems = [*problems, *([late] if late else [])]
        for problem in problems:  # a bad cell costs only itself (#72): the row's other ratings are kept
            self.quarantine(path.name, line_no, raw, f"{problem} ({BAD_CELL_ONLY})")
        self.rows += [
            dict(
                checkpoint_id=self.checkpoint_id,
                sample_id=sid,
                evaluator=evaluator,
                rater_kind=kind,
                dimension=dim,
                score=x,
                source_file=path.name,
                line_number=line_no,
                rated_at=at,
            )
            for dim, x in scores.items()
        ]

    def finish(self) -> RatingsLoad:
        out = self.out
        out.ratings = pd.DataFrame(self.rows, columns=RATING_COLUMNS).astype(
            {"score": "float64", "line_number": "int64", RATED_AT: "datetime64[us, UTC]"}
        )
        out.quarantine = pd.DataFrame(self.bad, columns=QUARANTINE_COLUMNS) if self.bad else empty_quarantine()
        return out


def load_ratings(
    rubric: RubricConfig,
    checkpoint_id: str,
    sample_ids: set[str],
    root: Path | None = None,
    known_checkpoints: set[str] | None = None,
) -> RatingsLoad:
    """This checkpoint's ratings from the rubric's rating folder, validated (see the module's docstring).

    ``known_checkpoints`` (every registered checkpoint) tells a row for another checkpoint from a row that names
    none: the first is left for that checkpoint's run, the second is quarantined. Without it, any other name in a
    checkpoint column counts as another checkpoint."""
    folder = (root or settings.ratings_dir()) / rubric.name
    reader = _RatingsReader(rubric, checkpoint_id, sample_ids, known_checkpoints)
    if folder.is_dir():
        # *.csv in any letter case; a "file" that is a directory, a FIFO (reading would block), a device (a link to
        # /dev/zero never ends), a dangling link or larger than MAX_RATINGS_BYTES is refused with its path, and
        # the other files are read
        for path in sorted(p for p in folder.iterdir() if p.suffix.lower() == ".csv"):
            why = _unreadable(path)
            if why:
                if not reader.names_others_only(path, ""):  # unreadable: only its name can say whose it is
                    reader.quarantine(path.name, 1, "", f"file refused: {path} is {why}")
                reader.out.problems.append(f"{path.name}: refused ({why})")
                continue
            reader.read_file(path)
    return reader.finish()


SOURCES = "human_ratings_sources"  # per checkpoint: the version of the ratings folder its human_ratings was read from


_NOT_SCORES = {"sample_id", "evaluator", "checkpoint", "checkpoint_id", "rater_kind", "notes"}
_HOLDS: dict[tuple[str, int, int], bool] = {}  # (path, size, mtime) -> whether the file holds a score


def _holds_a_score(path: Path, size: int, mtime: int) -> bool:
    """Whether a ratings file has any cell filled in past its bookkeeping columns (``ratings-template``'s blank
    file has none: it is no rating yet). Worked out once per version of the file; a file that cannot be read
    counts (the loader will say why)."""
    key = (str(path), size, mtime)
    if key not in _HOLDS:
        try:
            with path.open(newline="", encoding="utf-8-sig", errors="replace") as fh:
                reader = csv.DictReader(fh)
                scored = [
                    c for c in (reader.fieldnames or []) if c and c not in _NOT_SCORES and not c.startswith("read_")
                ]
                _HOLDS[key] = any(any((row.get(c) or "").strip() for c in scored) for row in reader)
        except (OSError, csv.Error):
            _HOLDS[key] = True
    return _HOLDS[key]


def _scored_files(folder: Path) -> list[tuple[Path, int, int]]:
    """The files ``load_ratings`` reads that hold a score: (path, size, modification time)."""
    out = []
    if folder.is_dir():
        for p in sorted(folder.iterdir()):
            if p.suffix.lower() == ".csv":
                try:
                    st = p.stat()
                except OSError:
                    continue
                if st.st_size <= MAX_RATINGS_BYTES and not _holds_a_score(p, st.st_size, st.st_mtime_ns):
                    continue
                out.append((p, st.st_size, st.st_mtime_ns))
    return out


def folder_fingerprint(rubric_name: str, root: Path | None = None) -> str:
    """The version of a rubric's ratings folder: the names, sizes and modification times of the files
    ``load_ratings`` reads that hold a score. A rating written, changed, added or removed changes it; a blank
    template written (``ratings-template``) does not, until a score is typed into it."""
    folder = (root or settings.ratings_dir()) / rubric_name
    parts = [f"{p.name}\0{size}\0{mtime}" for p, size, mtime in _scored_files(folder)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


_NAMES: dict[tuple[str, int, int], frozenset[str] | None] = {}  # (path, size, mtime) -> the checkpoints it names


def _names_in(path: Path, size: int, mtime: int) -> frozenset[str] | None:
    """The checkpoints a ratings file's rows are placed by: each row's ``checkpoint`` cell, or the file's name where
    the cell is blank or the column absent (``_placement``); None when the file cannot be read as CSV (it could be
    anyone's). Worked out once per version of the file."""
    key = (str(path), size, mtime)
    if key not in _NAMES:
        try:
            with path.open(newline="", encoding="utf-8-sig", errors="replace") as fh:
                text = fh.read()
            rows = list(csv.reader(io.StringIO(text), _dialect(text[:65536])))
            header = [c.strip() for c in rows[0]] if rows else []
            at = header.index("checkpoint") if "checkpoint" in header else None
            names = {(r[at].strip() if at is not None and at < len(r) else "") or path.stem for r in rows[1:] if any(r)}
            _NAMES[key] = frozenset(names or {path.stem})
        except (OSError, csv.Error, UnicodeError, ValueError):
            _NAMES[key] = None
    return _NAMES[key]


def _concerns(names: frozenset[str] | None, ckpt: str, known: set[str]) -> bool:
    """Whether a file whose rows name ``names`` can hold a row of ``ckpt``'s ratings or quarantine: a row naming it
    (or it but for letter case), or one naming no known checkpoint (quarantined in every checkpoint's run)."""
    if names is None:
        return True
    folded = ckpt.casefold()
    return any(n.casefold() == folded or n not in known for n in names)


def concerning(
    rubric_name: str, root: Path | None, checkpoint_ids: Sequence[str], known: set[str]
) -> dict[str, list[tuple[str, int, int]]]:
    """Per checkpoint, the scored files of the rubric's ratings folder that concern it (that can hold a row placed
    on it, ``_concerns``): (name, size, modification time). ``known``: the registered checkpoints."""
    folder = (root or settings.ratings_dir()) / rubric_name
    files = [(p, size, mtime, _names_in(p, size, mtime)) for p, size, mtime in _scored_files(folder)]
    out = {}
    for ckpt in checkpoint_ids:
        mine = known | {ckpt}
        out[ckpt] = [(p.name, size, mtime) for p, size, mtime, names in files if _concerns(names, ckpt, mine)]
    return out


def checkpoint_fingerprints(
    rubric_name: str, root: Path | None, checkpoint_ids: Sequence[str], known: set[str]
) -> dict[str, str]:
    """Each checkpoint's version of its ratings: ``folder_fingerprint`` over only the files that concern it
    (``concerning``), so a file written for one checkpoint leaves the others' ratings current."""
    return {ckpt: files_version(files) for ckpt, files in concerning(rubric_name, root, checkpoint_ids, known).items()}


def files_version(files: Sequence[tuple[str, int, int]]) -> str:
    """The version of a list of (name, size, modification time): what ``checkpoint_fingerprints`` records."""
    return hashlib.sha256("\n".join(f"{n}\0{size}\0{mtime}" for n, size, mtime in files).encode()).hexdigest()[:16]


def evaluated(wh: Warehouse, rubric: str) -> list[str]:
    """The checkpoints this rubric has samples of (as their recorded versions say: one small read; else the
    samples themselves)."""
    if not wh.exists():
        return []
    known = sorted({c for (name, c) in read_versions(wh, rubric) if name == Table.SAMPLES})
    if known:
        return known
    found = wh.read(rubric, Table.SAMPLES, columns=("checkpoint_id",), distinct=True, order_by=("checkpoint_id",))
    return [str(c) for c in found.checkpoint_id]


def stale(
    wh: Warehouse, rubric: str, root: Path, only: list[str] | None = None, known: set[str] | None = None
) -> tuple[str, list[str]]:
    """(the ratings folder's version now, the evaluated checkpoints whose human_ratings were read from another
    version of the files that concern them: ``checkpoint_fingerprints``; ``known``: the registered checkpoints)."""
    now = folder_fingerprint(rubric, root)
    ckpts = evaluated(wh, rubric) if only is None else only
    if not ckpts:
        return now, []
    rows = wh.read(rubric, SOURCES, columns=("checkpoint_id", "fingerprint"))
    read = {str(c): str(f) for c, f in zip(rows.checkpoint_id, rows.fingerprint)}
    mine = checkpoint_fingerprints(rubric, root, ckpts, known if known is not None else set(ckpts))
    return now, [c for c in ckpts if read.get(c) != mine[c]]


def has_ratings(wh: Warehouse, rubric: str, ckpt: str) -> bool:
    return (
        len(wh.read(rubric, Table.HUMAN_RATINGS, columns=("checkpoint_id",), where={"checkpoint_id": ckpt}, limit=1))
        > 0
    )


MAX_RATINGS_BYTES = 256 * 1024 * 1024
# A cell may be as long as a file that is read at all (the csv module's default is 128 KiB, past which it stops).
csv.field_size_limit(min(sys.maxsize, MAX_RATINGS_BYTES))


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read as a ratings file, or None."""
    why = not_a_file(path)
    if why is None and path.stat().st_size > MAX_RATINGS_BYTES:
        why = f"larger than {MAX_RATINGS_BYTES // 2**20} MiB"
    return why
