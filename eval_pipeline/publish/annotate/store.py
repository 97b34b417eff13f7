"""Ratings given in the browser, written as the files the pipeline already reads.

One file per rubric, checkpoint and evaluator: ``<EVAL_RATINGS_DIR>/<rubric>/<checkpoint>~<evaluator>.csv`` with the
columns the ratings loader reads (``sample_id, evaluator, checkpoint, <each rated dimension>, notes``). ``~`` is in
neither a checkpoint id's nor an evaluator name's alphabet, so no other pair can name the same file (``-`` is in
both: ``ckpt-0100`` rated by ``ema-zed`` and ``ckpt-0100-ema`` by ``zed`` were one file under the old
``<checkpoint>-<evaluator>.csv``; a pair's rows in such a file are read, and moved to its own file on its next save,
the other pair's left where they are). What the CSV has no column for (seconds spent, checklist ticks, a skip or a
flag and its reason) is kept beside it in ``<EVAL_RATINGS_DIR>/.annotate/<rubric>/<checkpoint>~<evaluator>.json``,
which the loader never reads. Rows someone typed into the file for another evaluator or checkpoint are kept as they
are on every save; one with columns this app does not write is not rewritten: the save is refused, saying so.

Durability: a submit rewrites the file whole into a temporary file in the same folder, fsyncs it, renames it over the
old one and fsyncs the folder, before the page answers. A process killed at any moment leaves either the old file or
the new one, never a mix; an acknowledged rating is on disk. Changing an earlier rating replaces its row: one row per
(sample, evaluator). Writers of one file take turns (a lock file held with ``flock``, across processes too).

A file edited by hand meanwhile is never overwritten silently: each write says which version of the file it read
(its fingerprint); a file changed since is refused with :class:`EditedElsewhere`, and the page says so.
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.ids import check_checkpoint_id, check_evaluator, check_identifier
from eval_pipeline.core.text import neutralise
from eval_pipeline.core.types import JSONObject

SEPARATOR = "~"  # between checkpoint and evaluator in a file name: in neither's alphabet (core.ids)


class EditedElsewhere(Exception):
    """The ratings file changed on disk since the page read it (edited by hand, or by another tab)."""


class CannotKeep(Exception):
    """The file holds a row this app would lose by rewriting it (a column it does not write)."""


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def umask() -> int:
    """The process's umask, read without changing it (Linux's /proc; elsewhere set and set back)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """``data`` as ``path``, all or nothing, on disk when this returns (temporary file, fsync, rename, fsync), with
    ``mode`` or, without one, the permissions a file made by ``open`` gets (0666 less the umask: a temporary
    file is made 0600, which the ratings files of a shared folder must not be)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, mode if mode is not None else 0o666 & ~umask())
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def fingerprint(path: Path) -> str:
    """What a version of a file is (its bytes' hash); ``absent`` for no file."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except FileNotFoundError:
        return "absent"


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

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.lock.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _source(self) -> Path:
        """The file this pair's rows are in: its own, or (before its first save) the old-named one."""
        return self.path if self.path.exists() or not self.legacy.exists() else self.legacy

    def version(self) -> str:
        return fingerprint(self._source())

    def read(self) -> dict[str, Rating]:
        """Every row of the file (the last one of a sample if a hand edit repeated it), with what the side file
        keeps; rows of other evaluators or checkpoints (a file edited by hand) are left out."""
        out: dict[str, Rating] = {}
        try:
            text = self._source().read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            return out
        extra = self._extra()
        for row in csv.DictReader(io.StringIO(text)):
            sid = (row.get("sample_id") or "").strip()
            if not sid or (row.get("evaluator") or self.evaluator) != self.evaluator:
                continue
            if (row.get("checkpoint") or self.checkpoint_id) != self.checkpoint_id:
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

    def _foreign(self, path: Path) -> list[dict[str, str]]:
        """The rows of ``path`` that are not this pair's (another evaluator or checkpoint), as read."""
        try:
            text = path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            return []
        rows = []
        for line_no, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
            if not (row.get("sample_id") or "").strip():
                continue
            mine = (row.get("evaluator") or self.evaluator) == self.evaluator and (
                row.get("checkpoint") or self.checkpoint_id
            ) == self.checkpoint_id
            if mine:
                continue
            extra = [k for k, v in row.items() if k is not None and k not in self._columns() and (v or "").strip()]
            if None in row or extra:
                raise CannotKeep(
                    f"{path.name} line {line_no} (evaluator {row.get('evaluator')!r}) has columns this app does not "
                    f"write ({', '.join(str(k) for k in extra) or 'more cells than the header'}): nothing was "
                    "written; move that row to a file of its own, then save again"
                )
            rows.append({k: row.get(k) or "" for k in self._columns()})
        return rows

    def _columns(self) -> list[str]:
        return ["sample_id", "evaluator", "checkpoint", *self.dims, "notes"]

    def _extra(self) -> JSONObject:
        source = self.extra if self.extra.exists() or not self.legacy_extra.exists() else self.legacy_extra
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, rating: Rating, read_version: str | None) -> dict[str, Rating]:
        """Write ``rating`` (replacing this sample's row) durably; returns every rating the file now holds (what
        ``read`` would give, without reading it again). ``read_version``:
        the version the page was drawn from; a file that changed since is refused (None: no check)."""
        with self._locked():
            for target in (self.path, self.extra):  # a write a kill cut short left its temporary file: gone now
                for tmp in target.parent.glob(f".{target.name}.*.tmp"):
                    tmp.unlink(missing_ok=True)
            now = self.version()
            if read_version is not None and read_version != now:
                raise EditedElsewhere(
                    f"{self.path.name} changed on disk since this page was drawn (edited by hand or in another "
                    "tab): nothing was written; reload the page to see the file as it is now"
                )
            rows = self.read()
            rows[rating.sample_id] = rating
            foreign = self._foreign(self.path)
            legacy_left = self._foreign(self.legacy) if self.legacy.exists() and not self.path.exists() else None
            extra = self._extra()
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
                atomic_write(self.extra, json.dumps(extra, sort_keys=True).encode())
            atomic_write(self.path, self._csv(rows, foreign))
            if legacy_left is not None:  # this pair's rows have moved: the other pair's stay in the old file
                if legacy_left:
                    atomic_write(self.legacy, self._csv({}, legacy_left))
                else:
                    self.legacy.unlink(missing_ok=True)
            return rows

    def _csv(self, rows: dict[str, Rating], foreign: list[dict[str, str]] | None = None) -> bytes:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self._columns())
        for row in foreign or []:  # typed in by hand for another evaluator or checkpoint: kept as it was
            w.writerow([row[c] for c in self._columns()])
        for sid in sorted(rows):
            r = rows[sid]
            if r.skipped and not any(v is not None for v in r.scores.values()):
                continue  # a skip is no rating: kept in the side file only
            cells = ["" if r.scores.get(d) is None else _number(r.scores[d]) for d in self.dims]
            w.writerow([sid, self.evaluator, self.checkpoint_id, *cells, neutralise(r.notes.replace("\r", " "))])
        return buf.getvalue().encode("utf-8")


def _number(v: float | None) -> str:
    return "" if v is None else (str(int(v)) if float(v).is_integer() else f"{v:g}")
