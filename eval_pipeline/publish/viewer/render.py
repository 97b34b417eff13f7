"""Display helpers for the viewer: the word-level diff, the input fields as the rubric declares them, numbers."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.types import Record
from eval_pipeline.publish.viewer.queries import parse_json_cell

_WORD = re.compile(r"\w+|[^\w\s]|\s+")


def word_diff(old: str | None, new: str | None) -> Markup:
    """The new text with words the parent did not have in <ins> and words it dropped in <del>."""
    a = _WORD.findall(old or "")
    b = _WORD.findall(new or "")
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(str(escape("".join(b[j1:j2]))))
            continue
        if op in ("delete", "replace"):
            out.append(f"<del>{escape(''.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            out.append(f"<ins>{escape(''.join(b[j1:j2]))}</ins>")
    return Markup("".join(out))


def num(v: Any, digits: int = 3) -> str:
    """A number for display: integers as they are, others rounded; blanks for missing."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f:
        return "–"
    if f.is_integer() and abs(f) < 1e12:
        return str(int(f))
    return f"{f:.{digits}f}".rstrip("0").rstrip(".")


def signed(v: object, digits: int = 3) -> str:
    """A change with its sign; one that rounds to nothing at the digits shown is ``±0``, never ``+0`` or ``-0``."""
    if v is None:
        return "–"
    s = num(v, digits)
    if s in ("0", "-0"):
        return "±0"
    return s if s.startswith("-") or s == "–" else "+" + s


def change_class(delta: object, change: str | None, digits: int = 3) -> str:
    """The colour of a shown change: good or bad only when it is significant (``change``) and shows as more than
    nothing at the digits shown; else muted."""
    if signed(delta, digits) in ("±0", "–"):
        return "muted"
    return "good" if change == "better" else "bad" if change == "worse" else "muted"


@dataclass
class FieldView:
    name: str
    label: str
    description: str
    type: str
    value: Any  # a string, number, list of strings, dict, or list of dicts


@dataclass
class FieldGroup:
    title: str
    fields: list[FieldView]


def input_groups(rubric: RubricConfig | None, sample: Record | None) -> list[FieldGroup]:
    """The sample's input fields grouped by where they sit in the raw JSON (``game_state.health`` under
    ``game_state``), in the order the rubric declares them; the id and the response are shown apart."""
    if sample is None:
        return []
    groups: dict[str, FieldGroup] = {}
    if rubric is None:
        skip = {"checkpoint_id", "line_number", "rubric_version", "sample_id", "response"}
        fields = [FieldView(k, k, "", "", parse_json_cell(v)) for k, v in sample.items() if k not in skip]
        return [FieldGroup("input", fields)]
    special = {rubric.inputs.id_field, rubric.inputs.response_field}
    for f in rubric.inputs.fields:
        if f.name in special or f.name not in sample:
            continue
        path = f.json_path
        title = ".".join(path[:-1]) if len(path) > 1 else "input"
        group = groups.setdefault(title, FieldGroup(title, []))
        group.fields.append(FieldView(f.name, path[-1], f.description, f.type, parse_json_cell(sample[f.name])))
    return list(groups.values())


def dist(value: object) -> str:
    """A score distribution (JSON or a mapping, score -> probability) as a person reads it: "3: 10 % · 4: 70 %"."""
    import json

    try:
        data = json.loads(value) if isinstance(value, str) else value
        items = sorted(((float(k), float(v)) for k, v in dict(data).items()), key=lambda kv: kv[0])  # type: ignore[arg-type]
    except (TypeError, ValueError, AttributeError):
        return str(value)
    return " · ".join(f"{k:g}: {v:.0%}" for k, v in items if v >= 0.005)
