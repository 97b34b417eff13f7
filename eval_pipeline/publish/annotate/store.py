"""Ratings given in the browser, written as the files the pipeline already reads.

One file per rubric, checkpoint and evaluator: ``<EVAL_RATINGS_DIR>/<rubric>/<checkpoint>~<evaluator>.csv`` with the
columns the ratings loader reads (``sample_id, evaluator, checkpoint, <each rated dimension>, notes, rated_at``;
``rated_at``: when the row was first saved, kept through later edits: the order trust is decided in; written in the
files the app begins, not added to one typed by hand, whose rows then have no moment: agreement.trust decides
them as they stand).
``~`` is in neither a checkpoint id's nor an evaluator name's alphabet, so no other pair can name the same file
(``-`` is in both: ``ckpt-0100`` rated by ``ema-zed`` and ``ckpt-0100-ema`` by ``zed`` were one file under the old
``<checkpoint>-<evaluator>.csv``; a pair's rows in such a file are read, and moved to its own file on its next save,
the other pair's left where they are). What the CSV has no column for (seconds spent, checklist ticks, a skip or a
flag and its reason) is kept beside it in ``<EVAL_RATINGS_DIR>/.annotate/<rubric>/<checkpoint>~<evaluator>.json``,
which the loader never reads.

A person's file is theirs: a save from the page changes only the row of the sample it rates (or adds it), and
keeps every other line byte for byte: rows typed by hand for another evaluator or checkpoint, rows with cells or
columns this app does not write, blank lines, the byte-order mark and line endings. Columns the file lacks are
added to its header only. The rated sample's own row keeps its cells of columns the app does not write; one whose
cells the app cannot read (a score that is not a number, more cells than the header) is not replaced: the save is
refused, naming the line and the cell (:class:`CannotKeep`).

Durability: a submit writes the file whole into a temporary file in the same folder, fsyncs it, renames it over the
old one and fsyncs the folder, before the page answers. Every file a save changes (the CSV, the side file, an
old-named file) is staged first and renamed only once all are staged: a save that cannot write one of them (a
read-only folder, a full disk) writes none. A process killed at any moment leaves either the old file or
the new one, never a mix; an acknowledged rating is on disk. Changing an earlier rating replaces its row: one row per
(sample, evaluator). Writers of one file take turns (a lock file held with ``flock``, across processes too).

A file edited by hand meanwhile is never overwritten silently: each write says which version of the file it read
(its fingerprint); a file changed since is refused with :class:`EditedElsewhere`, and the page says so.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import RATED_AT
from eval_pipeline.core.ids import check_checkpoint_id, check_evaluator, check_identifier
from eval_pipeline.core.locks import file_lock
from eval_pipeline.core.text import neutralise
from eval_pipeline.core.types import JSONObject
from eval_pipeline.publish.annotate.files import atomic_writes

SEPARATOR = "~"  # between checkpoint and evaluator in a file name: in neither's alphabet (core.ids)


class EditedElsewhere(Exception):
    """The ratings file changed on disk since the page read it (edited by hand, or by another tab)."""


class CannotKeep(Exception):
    """The rated sample's row holds a cell this app cannot read, which replacing the row would lose."""


def fingerprint(path: Path) -> str:
    """What a version of a file is (its bytes' hash); ``absent`` for no file."""
    return _digest(_bytes_of(path))


def _bytes_of(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _digest(raw: bytes | None) -> str:
    return "absent" if raw is None else hashlib.sha256(raw).hexdigest()[:16]


@dataclass
class Rating:
    """One evaluator's rating of one sample: a score per rated dimension (None: not rated), notes, and what the
    CSV has no column for."""

    sample_id: str
    scores: dict[str, float | None]
    notes: str = ""
    seconds: float = 0.0
    checklist: dict[str, list[int]] = field(default_factory=dict)  # dimension -> indexes of the ticked items
    skipped: str = ""  # the reason, when skipped
    flagged: str = ""  # the reason, when flagged


class RatingsFile:
    """The ratings one evaluator gave one checkpoint on one rubric, as a CSV the pipeline reads."""

    def __init__(self, root: Path, rubric: RubricConfig, checkpoint_id: str, evaluator: str):
        self.rubric = rubric
        self.checkpoint_id = check_checkpoint_id(checkpoint_id)
        self.evaluator = check_evaluator(evaluator)
        check_identifier(rubric.name, "rubric name")
        self.path = Path(root) / rubric.name / f"{checkpoint_id}{SEPARATOR}{evaluator}.csv"
        self.extra = Path(root) / ".annotate" / rubric.name / f"{checkpoint_id}{SEPARATOR}{evaluator}.json"
        self.lock = Path(root) / ".annotate" / rubric.name / f"{checkpoint_id}{SEPARATOR}{evaluator}.lock"
        # the old, ambiguous name: read (this pair's rows only) until this pair's first save moves them
        self.legacy = Path(root) / rubric.name / f"{checkpoint_id}-{evaluator}.csv"
        self.legacy_extra = Path(root) / ".annotate" / rubric.name / f"{checkpoint_id}-{evaluator}.json"
        self.dims = list(rubric.rating_scales)

    def _source(self) -> Path:
        """The file this pair's rows are in: its own, or (before its first save) the old-named one."""
        return self.path if self.path.exists() or not self.legacy.exists() else self.legacy

    def version(self) -> str:
        return fingerprint(self._source())

    def read(self) -> dict[str, Rating]:
        """Every row of the file (the last one of a sample if a hand edit repeated it), with what the side file
        keeps; rows of other evaluators or checkpoints (a file edited by hand) are left out."""
        raw = _bytes_of(self._source())
        return {} if raw is None else self._ratings(raw, self._extra())

    def _ratings(self, raw: bytes, extra: JSONObject) -> dict[str, Rating]:
        """``read``'s ratings, from the file's bytes and the side file's entries."""
        out: dict[str, Rating] = {}
        text = raw.decode("utf-8-sig")
        for row in csv.DictReader(io.StringIO(text)):
            sid = (row.get("sample_id") or "").strip()
            if not sid or not self.is_mine(row):
                continue
            scores: dict[str, float | None] = {}
            for d in self.dims:
                cell = (row.get(d) or "").strip()
                try:
                    scores[d] = float(cell) if cell else None
                except ValueError:
                    scores[d] = None
            more = extra.get(sid, {})
            out[sid] = Rating(
                sid,
                scores,
                row.get("notes") or "",
                float(more.get("seconds", 0.0)),
                {k: list(v) for k, v in more.get("checklist", {}).items()},
                str(more.get("skipped", "")),
                str(more.get("flagged", "")),
            )
        for sid, more in extra.items():  # skipped or flagged without a row
            if sid not in out and (more.get("skipped") or more.get("flagged")):
                out[sid] = Rating(
                    sid,
                    dict.fromkeys(self.dims),
                    seconds=float(more.get("seconds", 0.0)),
                    skipped=str(more.get("skipped", "")),
                    flagged=str(more.get("flagged", "")),
                )
        return out

    def _columns(self) -> list[str]:
        return ["sample_id", "evaluator", "checkpoint", *self.dims, "notes", RATED_AT]

    def _extra(self) -> JSONObject:
        source = self.extra if self.extra.exists() or not self.legacy_extra.exists() else self.legacy_extra
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, rating: Rating, read_version: str | None) -> dict[str, Rating]:
        """Write ``rating`` (replacing this sample's row, every other line kept byte for byte) durably; returns
        every rating the file now holds (what ``read`` would give, without reading it again). ``read_version``:
        the version the page was drawn from; a file that changed since is refused (None: no check)."""
        with file_lock(self.lock):
            for target in (self.path, self.extra, self.legacy):  # a write a kill cut short left its temporary file
                for tmp in target.parent.glob(f".{target.name}.*.tmp"):
                    tmp.unlink(missing_ok=True)
            source = self._source()
            raw = _bytes_of(source)  # read once: its version, its ratings and its lines
            if read_version is not None and read_version != _digest(raw):
                raise EditedElsewhere(
                    f"{self.path.name} changed on disk since this page was drawn (edited by hand or in another "
                    "tab): nothing was written; reload the page to see the file as it is now"
                )
            extra = self._extra()
            rows = {} if raw is None else self._ratings(raw, extra)
            rows[rating.sample_id] = rating
            table = _Lines.of(raw or b"", self._columns())
            mine = table.edit(self, rating)
            writes: dict[Path, bytes | None] = {}
            if source == self.legacy and self.legacy != self.path:  # this pair's rows move to their own file
                writes[self.path] = table.text(mine)
                others = [i for i in range(len(table.records)) if i not in mine]
                writes[self.legacy] = table.text(others) if table.holds_rows(others) else None
            else:
                writes[self.path] = table.text(range(len(table.records)))
            more = {
                "seconds": round(rating.seconds, 1),
                "checklist": rating.checklist,
                "skipped": rating.skipped,
                "flagged": rating.flagged,
            }
            empty = not (more["seconds"] or more["checklist"] or more["skipped"] or more["flagged"])
            if extra.get(rating.sample_id, {} if empty else None) != more and not (
                empty and rating.sample_id not in extra
            ):
                extra[rating.sample_id] = more  # written only when it says something new
                writes[self.extra] = json.dumps(extra, sort_keys=True).encode()
            atomic_writes(writes)
            return rows

    def is_mine(self, row: dict[str, str]) -> bool:
        """Whether a file's row is this pair's (a row without evaluator or checkpoint is the file's pair's)."""
        return (row.get("evaluator") or self.evaluator) == self.evaluator and (
            row.get("checkpoint") or self.checkpoint_id
        ) == self.checkpoint_id

    def row_cells(self, rating: Rating) -> dict[str, str]:
        """The cells of ``rating``'s row, by column."""
        cells = {"sample_id": rating.sample_id, "evaluator": self.evaluator, "checkpoint": self.checkpoint_id}
        cells.update({d: "" if rating.scores.get(d) is None else _number(rating.scores[d]) for d in self.dims})
        cells["notes"] = str(neutralise(rating.notes.replace("\r", " ")))
        return cells


@dataclass
class _Lines:
    """A ratings CSV as its header and its records, each with the exact text it was read from."""

    bom: bytes
    header: list[str]
    header_text: str
    newline: str
    records: list[tuple[str, list[str]]]  # (raw text, cells)

    @classmethod
    def of(cls, raw: bytes, columns: list[str]) -> _Lines:
        bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
        text = raw[len(bom) :].decode("utf-8")
        lines = [line for line in re.split("(?<=\n)", text) if line]  # each with its own end: \n only
        consumed: list[str] = []

        def feed() -> Iterator[str]:
            for line in lines:
                consumed.append(line)
                yield line

        records = []
        for cells in csv.reader(feed()):
            records.append(("".join(consumed), cells))
            consumed.clear()
        if not records:
            return cls(bom, list(columns), "", "\n", [])
        (head_text, header), body = records[0], records[1:]
        newline = "\r\n" if head_text.endswith("\r\n") else "\n"
        # columns the file lacks: added to its header only (shorter rows read them as empty); rated_at only to a
        # file the app began (a file typed by hand keeps its header: its rows' moment is when the pipeline reads them)
        missing = [c for c in columns if c not in header and c != RATED_AT]
        if missing:
            header = [*header, *missing]
            head_text = _csv_line(header, newline)
        return cls(bom, header, head_text, newline, body)

    def holds_rows(self, indexes: list[int]) -> bool:
        return any(self.records[i][1] for i in indexes)

    def text(self, indexes: Any) -> bytes:
        head = self.header_text or _csv_line(self.header, self.newline)
        body = []
        for i in indexes:
            line = self.records[i][0]
            body.append(line if line.endswith("\n") else line + self.newline)
        return self.bom + (head + "".join(body)).encode("utf-8")

    def edit(self, file: RatingsFile, rating: Rating) -> list[int]:
        """The records with ``rating``'s row in place of its sample's row(s) (added at the end when it had none; none
        for a skip without scores); the indexes of the pair's records after it. Refused (``CannotKeep``) when a row
        it replaces holds a cell the app cannot read."""
        at: list[int] = []
        mine: list[int] = []
        for i, (_raw, cells) in enumerate(self.records):
            row = dict(zip(self.header, cells))
            if not cells or not file.is_mine(row):
                continue
            mine.append(i)
            if (row.get("sample_id") or "").strip() != rating.sample_id:
                continue
            line = max(self.header_text.count("\n"), 1) + sum(r.count("\n") for r, _ in self.records[:i]) + 1
            if len(cells) > len(self.header):
                raise CannotKeep(
                    f"{file.path.name} line {line}: the row of {rating.sample_id} has more cells than the header: "
                    "nothing was written; correct that row by hand, then save again"
                )
            for d in file.dims:
                cell = (row.get(d) or "").strip()
                if cell and _not_number(cell):
                    raise CannotKeep(
                        f"{file.path.name} line {line}: {d} of {rating.sample_id} is {cell[:40]!r}, not a number, and "
                        "saving would replace it: nothing was written; correct that cell by hand, then save again"
                    )
            at.append(i)
        before = dict(zip(self.header, self.records[at[-1]][1])) if at else {}
        kept = {**before, **file.row_cells(rating)}  # the cells of columns the app does not write stay
        if RATED_AT in self.header and not (kept.get(RATED_AT) or "").strip():  # first rated: kept through edits
            kept[RATED_AT] = now_utc()
        cells = [kept.get(c, "") for c in self.header]
        new = (_csv_line(cells, self.newline), cells)
        writes_row = not (rating.skipped and not any(v is not None for v in rating.scores.values()))
        gone = set(at[1:]) | (set(at[:1]) if not writes_row else set())
        if at and writes_row:
            self.records[at[0]] = new
        elif writes_row:
            if self.records and not self.records[-1][0].endswith("\n"):
                raw, cells = self.records[-1]
                self.records[-1] = (raw + self.newline, cells)
            self.records.append(new)
            mine.append(len(self.records) - 1)
        keep = [i for i in range(len(self.records)) if i not in gone]
        index = {old: n for n, old in enumerate(keep)}
        self.records = [self.records[i] for i in keep]
        return [index[i] for i in mine if i in index]


def now_utc() -> str:
    """This moment as the ``rated_at`` cell holds it: ISO 8601 in UTC, to the microsecond (two saves in one
    second keep their order)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _csv_line(cells: list[str], newline: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator=newline).writerow(cells)
    return buf.getvalue()


def _not_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return True
    return False


def _number(v: float | None) -> str:
    return "" if v is None else (str(int(v)) if float(v).is_integer() else f"{v:g}")
