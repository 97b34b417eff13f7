"""One verdict per checkpoint and rubric, decided here once and stored (``<rubric>.verdict``, ``main.verdicts``):
the console, the viewer, the report, ``export`` and ``main.leaderboard`` read it and never decide again.

Verdicts, worst first (``VERDICTS``):

* ``incomplete``: the data is short of the rubric's ``completeness`` rules (judge scores missing, lines
  quarantined, rating rows rejected, a rating file refused whole). Its numbers are not a result: the row keeps
  ``last_complete_snapshot``, the lake snapshot that still holds the last complete one.
* ``pending judge``: judge scores wait on a judge batch (EVAL_JUDGE_MODE=batch) still in progress: no result yet,
  and no failure; the reason names each batch and how far it is ("judge batch … in progress (n of N done)").
* ``regressed``: a significant change for the worse against the parent (a regression gate failed, or, for a
  rubric without one, a change the comparison flags).
* ``failed gates``: another gate failed.
* ``judge untrusted``: the judge is untrusted, or drifts, on a dimension (its ``judge_trust`` rows), whether or
  not the rubric has a ``judge_reliability`` gate.
* ``pending ratings``: not enough data yet (a pending gate, or the judge's verdict pending): no failure of the
  model, said as such.
* ``passed``.

Counts agree by construction: ``gates_passed + gates_failed + gates_pending == gates_total``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import (
    BAD_CELL_ONLY,
    BATCH_PENDING,
    PANEL,
    QUARANTINE,
    RELIABILITY_DRIFTS,
    RELIABILITY_UNTRUSTED,
    UNPLACED,
    UNRATED,
    WAITING_ON_BATCH,
    Table,
)
from eval_pipeline.core.types import Row
from eval_pipeline.storage.tables import Filter
from eval_pipeline.storage.warehouse import Warehouse

VERDICTS = ("incomplete", "pending judge", "regressed", "failed gates", "judge untrusted", "pending ratings", "passed")
TABLE = "verdict"
# what a reason line is about: the console prints the tag, the viewer colours by it
REGRESSED, INCOMPLETE, JUDGE, FAILED, PENDING = "REGRESSED", "INCOMPLETE", "judge", "failed", "pending"


def worst(verdicts: list[str]) -> str:
    """The worst of ``verdicts`` (``passed`` for none; a word that is not a verdict, such as "not decided", is
    worse than any)."""
    return min(verdicts, key=lambda v: VERDICTS.index(v) if v in VERDICTS else -1, default="passed")


@dataclass
class Verdict:
    """What one rubric's evaluation of one checkpoint comes to; one row of ``<rubric>.verdict``."""

    rubric: str
    checkpoint_id: str
    verdict: str = "passed"
    reasons: list[tuple[str, str]] = field(default_factory=list)  # (tag, text), what decided it first
    lines: int = 0
    valid: int = 0
    quarantined: int = 0
    judge_total: int = 0
    judge_missing: int = 0
    judge_reasons: dict[str, int] = field(default_factory=dict)
    judge_pending: int = 0  # judge scores waiting on a judge batch (not missing: not yet answered)
    judge_batches: list[str] = field(default_factory=list)  # each batch they wait on, as its reason says it
    rating_rows: int = 0
    rating_rejected: int = 0
    rating_unplaced: int = 0  # rows of the ratings folder naming no known checkpoint (not this one's to count)
    rating_unrated: int = 0  # rows with no score written yet (a template being filled in)
    rating_files_rejected: list[str] = field(default_factory=list)
    gates_total: int = 0
    gates_passed: int = 0
    gates_failed: int = 0
    gates_pending: int = 0
    failed_gates: list[Row] = field(default_factory=list)  # gate, kind, value, threshold, reason
    trust: str = "no judge"  # trusted / untrusted / pending / no judge / not assessed
    untrusted: list[str] = field(default_factory=list)
    drifting: list[str] = field(default_factory=list)
    trust_pending: list[str] = field(default_factory=list)
    ratings_needed: int = 0  # more rated samples that would settle a pending judge
    versus_people: dict[str, str] = field(default_factory=dict)  # dimension -> as consistent as / below / above people
    rated: int = 0  # the rated samples the judge's pooled verdict rests on
    aligned: str = ""  # the adopted alignment the judge comes from, if any (a new judge: its trust counted afresh)
    aligned_tuned_on: int = 0  # the ratings that alignment was tuned on (never part of its calibration set)
    judge: str = ""
    regressions: list[Row] = field(default_factory=list)
    headline_name: str = ""
    headline: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    # the headline's change against the parent: "better" / "worse" when significant (Holm-corrected p < 0.05, or
    # its interval clear of zero where no p was computed), in the score's declared direction; else "no clear change"
    headline_delta: float | None = None
    headline_change: str = ""
    headline_lower_is_better: bool = False
    incomplete: list[str] = field(default_factory=list)
    run_id: str = ""  # the run that decided it
    snapshot: int | None = None  # a complete verdict: the lake snapshot holding its results
    last_complete_snapshot: int | None = None  # an incomplete one: the snapshot of the last complete result
    pool_version: str = ""  # the calibration pool it was decided on (its content version)

    @property
    def summary(self) -> str:
        """The counts in one line, the same wherever shown."""
        parts = [f"{self.valid}/{self.lines} lines valid"]
        if self.judge_total:
            parts.append(f"judge {self.judge_total - self.judge_missing}/{self.judge_total}")
        if self.judge_pending:
            parts.append(f"{self.judge_pending} judge scores waiting on batches")
        if self.rating_rows:
            rejected = f" ({self.rating_rejected} rejected)" if self.rating_rejected else ""
            parts.append(f"{self.rating_rows} rating rows{rejected}")
        if self.rating_unplaced:
            parts.append(f"{self.rating_unplaced} unplaced rating rows")
        if self.rating_unrated:
            parts.append(f"{self.rating_unrated} rows not rated yet")
        if self.gates_total:
            pend = f", {self.gates_pending} pending" if self.gates_pending else ""
            parts.append(f"gates {self.gates_passed}/{self.gates_total} passed{pend}")
        return " · ".join(parts)

    @property
    def ratings_to_settle(self) -> str:
        """What "about N more" is and what moves it, the same wherever shown (console, viewer, annotate pages,
        report): the projection, the ratings so far, the command; for an adopted alignment, why its count started
        again (#73: "about 409 more" right after adopting said none of it). Empty when no rating is needed."""
        if not self.ratings_needed:
            return ""
        so_far = f"{self.rated} so far; a projection from its intervals so far" if self.rated else "none rated yet"
        text = (
            f"about {self.ratings_needed} more rated samples would settle it ({so_far}: `eval-pipeline annotate` "
            "asks for the most telling first)"
        )
        if self.aligned:
            text += (
                f"; the judge is alignment {self.aligned}, adopted: a new judge, whose trust counts only ratings it "
                f"was not tuned on (the {self.aligned_tuned_on} it was tuned on never count)"
            )
        return text

    def row(self) -> Row:
        """The stored row: scalars as columns, lists and maps as JSON text."""
        out: Row = {}
        for key, value in asdict(self).items():
            out[key] = json.dumps(value) if isinstance(value, list | dict) else value
        out["summary"] = self.summary
        out["headline_reason"] = self.reasons[0][1] if self.reasons else ""
        return out

    @classmethod
    def from_row(cls, row: Row) -> Verdict:
        names = {f for f in cls.__dataclass_fields__}
        kwargs: dict[str, Any] = {}
        for key, value in row.items():
            if key not in names:
                continue
            default = cls.__dataclass_fields__[key].default_factory
            if isinstance(value, str) and default in (list, dict):
                value = json.loads(value)
            if value is pd.NA or (isinstance(value, float) and value != value):
                value = None
            if key in ("snapshot", "last_complete_snapshot") and value is not None:
                value = int(value)
            if key == "run_id":
                value = str(value or "")
            kwargs[key] = value
        kwargs["reasons"] = [tuple(r) for r in kwargs.get("reasons", [])]
        return cls(**kwargs)


def missing_judge_scores(wh: Warehouse, rubric: RubricConfig, ckpt: str) -> tuple[int, int, dict[str, int]]:
    """(missing, total, the most frequent reasons) over the panel's dimension and questionnaire-metric scores of
    a checkpoint; (0, 0, {}) before judge_scores exists. A score waiting on a judge batch is pending, not missing:
    counted in neither (``judge_scores_pending``)."""
    missing, total, reasons, _, _ = judge_scores_pending(wh, rubric, ckpt)
    return missing, total, reasons


_BATCH = re.compile(re.escape(BATCH_PENDING) + r" (\S+) ([^()]+?) \((\d+) of (\d+) done\)")


REASON_CHARS = 1000  # a missing score's reason as the verdict quotes it (whole, for any reason the project writes)


def judge_scores_pending(
    wh: Warehouse, rubric: RubricConfig, ckpt: str
) -> tuple[int, int, dict[str, int], int, dict[str, str]]:
    """(missing, total, the most frequent reasons, the scores waiting, each batch waited on -> how it stands) over
    the panel's dimension and questionnaire-metric scores; the scores waiting on a judge batch are in neither count.
    Reads only those rows' status and reason (a questionnaire rubric has ~35 rows a sample: the full rows of 100k
    samples are GBs)."""
    panel = wh.read(
        rubric.name,
        Table.JUDGE_SCORES,
        columns=("status", "reason"),
        where={"checkpoint_id": ckpt, "judge": PANEL, "kind": ("dimension", "questionnaire_metric")},
    )
    waiting = panel.reason.fillna("").str.contains(BATCH_PENDING, regex=False) & (panel.status == "missing")
    batches: dict[str, str] = {}
    for text in panel.reason[waiting].drop_duplicates():
        for m in _BATCH.finditer(str(text)):
            batches[m.group(1)] = f"judge batch {m.group(1)} {m.group(2)} ({m.group(3)} of {m.group(4)} done)"
    panel = panel[~waiting]
    missing = panel[panel.status == "missing"]
    # counted by what a reason says before its details (its first clause), each shown whole: the hint that ends a
    # reason ("is the endpoint right? ...") is the part a person needs
    full = missing.reason.fillna("no reason").astype(str)
    kind = full.map(lambda r: r.split(";")[0][:120])
    counts = kind.value_counts()
    example = full.groupby(kind).agg(lambda texts: texts.value_counts().index[0]) if len(full) else {}
    top = {str(example[k])[:REASON_CHARS]: int(n) for k, n in counts.head(5).items()}
    return len(missing), len(panel), top, int(waiting.sum()), batches


def _read_counts(s: Warehouse, v: Verdict, rubric: RubricConfig, ckpt: str) -> None:
    v.lines = s.count(rubric.name, Table.RAW_OUTPUTS, {"checkpoint_id": ckpt})
    v.valid = s.count(rubric.name, Table.SAMPLES, {"checkpoint_id": ckpt})
    v.quarantined = s.count(*QUARANTINE, {"rubric": rubric.name, "checkpoint_id": ckpt, "stage": "validate"})
    v.judge_missing, v.judge_total, v.judge_reasons, v.judge_pending, batches = judge_scores_pending(s, rubric, ckpt)
    v.judge_batches = list(batches.values())
    ratings = {"checkpoint_id": ckpt}
    v.rating_rows = s.count(rubric.name, Table.HUMAN_RATINGS, ratings, distinct=("source_file", "line_number"))
    rejected = s.read(
        *QUARANTINE,
        columns=("source_file", "line_number", "reason"),
        where={"rubric": rubric.name, "checkpoint_id": ckpt, "stage": "ratings"},
    )
    if not len(rejected):
        return
    unplaced = rejected.reason.str.startswith(UNPLACED)
    unrated = rejected.reason.str.startswith(UNRATED)
    v.rating_unplaced, v.rating_unrated = int(unplaced.sum()), int(unrated.sum())
    rejected = rejected[~unplaced & ~unrated]
    whole = rejected[rejected.reason.str.startswith(("file header lacks", "file refused"))]
    v.rating_files_rejected = sorted(set(whole.source_file))
    rows = rejected.drop(whole.index[whole.line_number == 1])  # a refused file's header line is no row
    lines = rows.drop_duplicates(["source_file", "line_number"])
    kept_too = rows[rows.reason.str.endswith(f"({BAD_CELL_ONLY})")]  # a bad cell: its line's other ratings kept
    v.rating_rejected = len(lines)  # rows with anything rejected, a bad cell or the whole row
    v.rating_rows += len(lines) - len(kept_too.drop_duplicates(["source_file", "line_number"]))


def _share(part: int, whole: int, limit: float) -> str:
    """``part`` of ``whole`` as a percentage beside the rubric's limit, with as many decimals as it takes for a
    share past the limit not to print as the limit itself ("10.4%; the rubric allows 10%", never "10%, 10%")."""
    share = part / whole
    for digits in range(0, 4):
        if f"{share:.{digits}%}" != f"{limit:.{digits}%}":
            return f"{share:.{digits}%}; the rubric allows {limit:.{digits}%}"
    return f"{share:.4%}; the rubric allows {limit:.4%}"


def _incompleteness(v: Verdict, rubric: RubricConfig) -> list[str]:
    c, out = rubric.completeness, []
    if v.judge_total and v.judge_missing / v.judge_total > c.max_missing_judge_scores:
        top = next(iter(v.judge_reasons), "")
        share = _share(v.judge_missing, v.judge_total, c.max_missing_judge_scores)
        out.append(f"{v.judge_missing} of {v.judge_total} judge scores missing ({share}): {top}")
    if v.lines and v.quarantined / v.lines > c.max_quarantined_lines:
        share = _share(v.quarantined, v.lines, c.max_quarantined_lines)
        out.append(f"{v.quarantined} of {v.lines} lines quarantined ({share}): see main.quarantine")
    if v.rating_rows and v.rating_rejected / v.rating_rows > c.max_rejected_rating_rows:
        share = _share(v.rating_rejected, v.rating_rows, c.max_rejected_rating_rows)
        out.append(f"{v.rating_rejected} of {v.rating_rows} rating rows rejected ({share}): see main.quarantine")
    if v.rating_files_rejected and not c.rating_files_rejected:
        out.append(f"rating file(s) rejected whole: {', '.join(v.rating_files_rejected)}")
    return out


def _number(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:.3g}"


_BELOW = re.compile(r"^below \S+ on ([^;]+);")


def _gate_text(g: Row) -> str:
    """``<gate> [on <what failed>] <value> (threshold t)``: the value named after what it is the value of. A gate
    that failed without a value (closed: nothing to measure) says why it has none, in its own reason's words."""
    on = _BELOW.match(str(g["reason"] or ""))
    subject = f" on {on.group(1)}" if on else ""
    value = _float(g["value"])
    if value is None or value != value:
        why = str(g["reason"] or "").removeprefix("failed: ").strip() or "nothing to measure"
        return f"{g['gate']}{subject}: no value ({why}; threshold {g['threshold']:g})"
    return f"{g['gate']}{subject} {_number(value)} (threshold {g['threshold']:g})"


def _gates(v: Verdict, gates: list[Row]) -> tuple[list[str], list[tuple[str, str]]]:
    """Fills the gate counts and failed gates from a checkpoint's gate rows (in gate order); returns (kinds of
    failed gates, pending (gate, reason))."""
    kinds: list[str] = []
    pending: list[tuple[str, str]] = []
    v.gates_total = len(gates)
    for g in gates:
        st = _value(g.get("status"))  # none: written before gates could be pending
        if st is None and _value(g["passed"]) is not None:
            st = "passed" if bool(g["passed"]) else "failed"
        if st == "passed":
            v.gates_passed += 1
        elif st == "failed":
            v.gates_failed += 1
            failed = {"gate": g["gate"], "kind": g["kind"], "value": _float(g["value"])}
            v.failed_gates.append({**failed, "threshold": float(g["threshold"]), "reason": g["reason"]})
            kinds.append(str(g["kind"]))
        elif WAITING_ON_BATCH in str(g["reason"]):  # what it reads is on its way: the judge is pending, said once
            v.judge_batches.append(f"{g['gate']}: {str(g['reason']).removeprefix('pending: ')}")
        else:
            pending.append((str(g["gate"]), str(g["reason"])))
    v.gates_pending = v.gates_total - v.gates_passed - v.gates_failed
    return kinds, pending


def _trust(v: Verdict, trust: list[Row]) -> None:
    """The judge's trust as a checkpoint's ``judge_trust`` rows say it (a dimension's, and the ``ALL`` row)."""
    if not trust:
        return
    dims = [r for r in trust if r["dimension"] != "ALL"]
    v.judge = str(trust[0].get("judge_label", ""))
    v.untrusted = sorted(str(r["dimension"]) for r in dims if r["verdict"] == "untrusted")
    v.trust_pending = sorted(str(r["dimension"]) for r in dims if r["verdict"] == "pending")
    v.drifting = sorted(str(r["dimension"]) for r in dims if _value(r.get("drift")) and r["verdict"] == "trusted")
    needed = [_float(r.get("needed")) or 0.0 for r in dims if r["verdict"] == "pending"]
    v.ratings_needed = int(max(needed, default=0)) if v.trust_pending else 0
    v.trust = "untrusted" if v.untrusted else "pending" if v.trust_pending else "trusted"
    v.versus_people = {str(r["dimension"]): r["versus_people"] for r in dims if isinstance(r.get("versus_people"), str)}
    rated = [n for n in (_value(r.get("n_rated")) for r in trust) if n is not None]
    if rated:
        v.rated = int(max(rated))


def change_of(delta: float, ci_low: float, ci_high: float, p_holm: float | None, lower_is_better: bool) -> str:
    """ "better", "worse" or "no clear change": significance first, then the direction the score declares."""
    if delta != delta:
        return ""
    significant = p_holm < 0.05 if p_holm is not None and p_holm == p_holm else (ci_low > 0 or ci_high < 0)
    if not significant or delta == 0:
        return "no clear change"
    return "better" if (delta > 0) != lower_is_better else "worse"


def _headline_change(v: Verdict, comparison: list[Row]) -> None:
    row = [r for r in comparison if r["score"] == v.headline_name] if v.headline_name else []
    if not row or "delta" not in row[0]:
        return
    r = row[0]
    p = _float(r.get("p_holm"))
    v.headline_lower_is_better = bool(_value(r.get("lower_is_better")) or False)
    delta = _float(r["delta"])
    if delta is not None:
        v.headline_delta = delta
        v.headline_change = change_of(delta, float(r["ci_low"]), float(r["ci_high"]), p, v.headline_lower_is_better)


def _regressions(v: Verdict, comparison: list[Row]) -> None:
    for r in comparison:
        if not _value(r.get("regression")):
            continue
        v.regressions.append(
            {
                "score": str(r["score"]),
                "parent": str(r["parent_id"]),
                "delta": float(r["delta"]),
                "ci_low": float(r["ci_low"]),
                "ci_high": float(r["ci_high"]),
                "p_holm": _float(r.get("p_holm")),
                "lower_is_better": bool(r.get("lower_is_better", False)),
                "calibrated": str(r["score"]).endswith("_calibrated"),
            }
        )


def regression_text(r: Row) -> str:
    """One regression as the console, the viewer and the report say it (the direction said when lower is
    better)."""
    p = "" if r.get("p_holm") is None else f" p_holm {r['p_holm']:.2g}"
    way = " (lower is better)" if r.get("lower_is_better") else ""
    calibrated = ", human-calibrated" if r.get("calibrated") else ""
    return (
        f"{r['score']} {r['delta']:+.3g} [{r['ci_low']:.3g}, {r['ci_high']:.3g}]{p}{way} vs {r['parent']}{calibrated}"
    )


# what ``_read_counts`` fills: read from the checkpoint's own rows (lines, samples, judge scores, ratings), not from
# any decision across checkpoints
COUNTS = (
    "lines",
    "valid",
    "quarantined",
    "judge_missing",
    "judge_total",
    "judge_reasons",
    "judge_pending",
    "judge_batches",
    "rating_rows",
    "rating_rejected",
    "rating_unplaced",
    "rating_unrated",
    "rating_files_rejected",
)


def decide(wh: Warehouse, rubric: RubricConfig, ckpt: str, counted: Verdict | None = None) -> Verdict:
    """The verdict on what one rubric's evaluation of one checkpoint left in the warehouse. ``counted``: its
    stored verdict, when the checkpoint's own rows have not changed since (its ``COUNTS`` are taken from it, not
    counted again); the rest is decided from what is there now."""
    return decide_all(wh, rubric, [ckpt], {ckpt: counted} if counted is not None else {})[ckpt]


def _records(frame: pd.DataFrame) -> dict[str, list[Row]]:
    """A table's rows by checkpoint as plain records: what a verdict reads of a checkpoint is a handful of rows,
    and reading them cell by cell from a frame costs more than deciding."""
    out: dict[str, list[Row]] = {}
    if not len(frame):
        return out
    for r in frame.to_dict("records"):
        out.setdefault(str(r["checkpoint_id"]), []).append(r)
    return out


def decide_all(
    wh: Warehouse, rubric: RubricConfig, ckpts: Sequence[str], counted: Mapping[str, Verdict] | None = None
) -> dict[str, Verdict]:
    """``decide`` for several checkpoints at once: each table a verdict reads is read once for all of them (one
    query, ``checkpoint_id IN (...)``); ``counted``: checkpoint -> its stored verdict, for those whose own rows have
    not changed since."""
    counted = counted or {}
    verdicts = {c: Verdict(rubric.name, c) for c in ckpts}
    within = {"checkpoint_id": tuple(ckpts)}
    with wh.session() as s:
        for c, v in verdicts.items():
            was = counted.get(c)
            if was is not None and all(getattr(was, f) is not None for f in COUNTS):
                for f in COUNTS:
                    setattr(v, f, copy.copy(getattr(was, f)))
            else:
                _read_counts(s, v, rubric, c)

        def rows(
            table: str, columns: Sequence[str] = (), order_by: Sequence[str] = (), **where: Filter
        ) -> dict[str, list[Row]]:
            if not s.table_exists(rubric.name, table):
                return {}
            found = s.read(rubric.name, table, columns=columns, where={**within, **where}, order_by=order_by)
            return _records(found)

        gates = rows(Table.GATES, order_by=("gate",))
        trust = rows(Table.JUDGE_TRUST)
        comparisons = rows(Table.COMPARISON)
        heads = rows(Table.SUMMARY, HEAD, breakdown="all", headline=True)
        labels = rows(Table.JUDGE_IDENTITY, ("checkpoint_id", "label"))
    regression_gate = any(g.kind == "regression" for g in rubric.gates)
    for c, v in verdicts.items():
        kinds, pending = _gates(v, gates.get(c, []))
        _trust(v, trust.get(c, []))
        changes = comparisons.get(c, [])
        _regressions(v, changes)
        notes = list(dict.fromkeys(str(r["note"]) for r in changes if r.get("status") == "not_comparable"))
        head = heads.get(c, [])
        if head:
            h = head[0]
            v.headline_name, v.n = str(h["score"]), int(_value(h["n"]) or 0)
            v.headline, v.ci_low, v.ci_high = (_float(h[k]) for k in ("mean", "ci_low", "ci_high"))
        if not v.judge:
            label = labels.get(c, [])
            v.judge = str(label[0]["label"] or "") if label else ""
        if changes:
            _headline_change(v, changes)
        if (rubric.judged_dimensions or rubric.questionnaire) and v.trust == "no judge":
            v.trust = "not assessed"
        v.incomplete = _incompleteness(v, rubric)
        if rubric.aligned is not None:
            v.aligned, v.aligned_tuned_on = rubric.aligned.id, len(rubric.aligned.tuned_on)
        _reasons(v, kinds, pending, notes, regression_gate)
    return verdicts


# the headline row of a checkpoint's summary, as a verdict reads it
HEAD = ("checkpoint_id", "score", "mean", "ci_low", "ci_high", "n", "headline")


def _value(x: Any) -> Any:
    """A stored cell, None when it holds nothing (None, NaN, NA)."""
    return None if x is None or x is pd.NA or (isinstance(x, float) and x != x) else x


def _float(x: Any) -> float | None:
    x = _value(x)
    return None if x is None else float(x)


def _reasons(
    v: Verdict, kinds: list[str], pending: list[tuple[str, str]], notes: list[str], regression_gate: bool
) -> None:
    # a rubric with a regression gate decides by it (its params may ignore a score); one without, by the comparison
    regressed = "regression" in kinds or (bool(v.regressions) and not regression_gate)
    shown_regressions = v.regressions if regressed else []
    other = [g for g in v.failed_gates if g["kind"] not in ("regression", "judge_reliability")]
    untrusted = bool(v.untrusted or v.drifting) or "judge_reliability" in kinds
    v.verdict = (
        "incomplete"
        if v.incomplete
        else "pending judge"
        if v.judge_batches
        else "regressed"
        if regressed
        else "failed gates"
        if other
        else "judge untrusted"
        if untrusted
        else "pending ratings"
        if pending or v.trust_pending
        else "passed"
    )
    out: list[tuple[str, str]] = [(INCOMPLETE, m) for m in v.incomplete]
    out += [(PENDING, b) for b in v.judge_batches]
    out += [(REGRESSED, regression_text(r)) for r in shown_regressions]
    if regressed and not shown_regressions:  # a regression gate's own reason
        out += [(REGRESSED, str(g["reason"])) for g in v.failed_gates if g["kind"] == "regression"]
    out += [(JUDGE, n) for n in notes]
    said = []
    if v.untrusted:
        said.append(f"untrusted on {', '.join(v.untrusted)}")
    if v.drifting:
        said.append(f"drifts on this checkpoint on {', '.join(v.drifting)}")
    if v.trust_pending:
        more = f": {v.ratings_to_settle}" if v.ratings_needed else ""
        if v.judge_total + v.judge_pending and v.judge_missing >= v.judge_total:  # no score to set ratings against
            more = (
                ": its scores are still on their way (judge batches)"
                if v.judge_pending
                else ": the judge has given no scores yet, so no rating can settle it"
            )
        said.append(f"pending on {', '.join(v.trust_pending)}{more}")
    if said:
        out.append((JUDGE, "; ".join(said)))
    # a failed reliability gate that no line above explains (the worked examples off), each failed part named,
    # whatever else is said of the judge (#72: with another dimension pending it was said nowhere)
    failed = [
        g
        for g in v.failed_gates
        if g["kind"] == "judge_reliability"
        and not str(g["reason"]).startswith((RELIABILITY_UNTRUSTED, RELIABILITY_DRIFTS))
    ]
    if failed:
        out.append(
            (JUDGE, "; ".join(f"{g['gate']}: {g['reason']}" if len(failed) > 1 else str(g["reason"]) for g in failed))
        )
    if v.versus_people:  # beside the people's own agreement with each other, where two or more rated the same items
        by: dict[str, list[str]] = {}
        for dim, how in sorted(v.versus_people.items()):
            by.setdefault(how, []).append(dim)
        order = ("below people", "as consistent as people", "above people")
        out.append((JUDGE, "; ".join(f"{how} on {', '.join(by[how])}" for how in order if how in by)))
    by_kind: dict[str, list[Row]] = {}
    for g in other:
        by_kind.setdefault(str(g["kind"]), []).append(g)
    for kind, gates in sorted(by_kind.items()):
        named = len(gates) == 1 and gates[0]["gate"] == kind  # a gate named after its kind: named once
        out.append((FAILED, ("" if named else f"{kind}: ") + "; ".join(_gate_text(g) for g in gates)))
    trust_gate_pending = any(name.startswith("judge_reliability") for name, _ in pending) and v.trust_pending
    for name, reason in pending:
        if trust_gate_pending and name.startswith("judge_reliability"):
            continue  # said once above, per dimension
        out.append((PENDING, f"{name}: {reason.removeprefix('pending: ')}"))
    v.reasons = out


def stored_row(wh: Warehouse, v: Verdict, run_id: str, snapshot: int | None) -> pd.DataFrame:
    """This checkpoint's verdict row as stored. A complete verdict records ``snapshot`` (the lake's snapshot that
    holds the results it speaks of); an incomplete one carries the last complete one forward."""
    columns = ("checkpoint_id", "verdict", "snapshot", "last_complete_snapshot")
    prev = wh.read(v.rubric, TABLE, columns=columns, where={"checkpoint_id": v.checkpoint_id})
    return stored_rows([v], prev.to_dict("records"), run_id, snapshot)


def stored_rows(verdicts: Sequence[Verdict], before: Sequence[Row], run_id: str, snapshot: int | None) -> pd.DataFrame:
    """``stored_row`` of several checkpoints' verdicts as one frame; ``before``: their stored rows (those that
    have one; at least their checkpoint, verdict, snapshot and last_complete_snapshot)."""
    prev = {str(r["checkpoint_id"]): r for r in before}
    now = pd.Timestamp.now(tz="UTC")
    rows = []
    for v in verdicts:
        last: Any = None
        if v.checkpoint_id in prev:
            was = prev[v.checkpoint_id]
            last = was["snapshot"] if was["verdict"] != "incomplete" else was["last_complete_snapshot"]
        v.run_id = run_id
        v.snapshot = None if v.verdict == "incomplete" else snapshot
        v.last_complete_snapshot = _value(last) if v.verdict == "incomplete" else None
        rows.append({**v.row(), "decided_at": now})
    df = pd.DataFrame(rows)
    for col in ("snapshot", "last_complete_snapshot"):
        df[col] = df[col].astype("Int64")
    for col in ("headline", "ci_low", "ci_high"):
        df[col] = df[col].astype("float64")
    return df


def store(wh: Warehouse, v: Verdict, run_id: str, snapshot: int | None) -> None:
    """Replace this checkpoint's verdict row (``stored_row``)."""
    wh.replace_partition(v.rubric, TABLE, stored_row(wh, v, run_id, snapshot), {"checkpoint_id": v.checkpoint_id})


def read(wh: Warehouse, rubric: str, checkpoint_ids: list[str] | None = None) -> list[Verdict]:
    """Stored verdicts of a rubric (of ``checkpoint_ids``, else all), with their run id as ``run_id`` attribute."""
    where = None if checkpoint_ids is None else {"checkpoint_id": tuple(checkpoint_ids)}
    df = wh.read(rubric, TABLE, where=where, order_by=("checkpoint_id",))
    return [Verdict.from_row(row) for row in df.to_dict("records")]
