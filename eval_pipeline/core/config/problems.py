"""What a rubric file that does not load is told: each problem with its file, the field's path in the YAML and a hint
where one helps; and the YAML read with libyaml's loader where it is there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

ITEM_KEYS = ("key", "name", "id", "function", "feature")


def field_path(raw: Any, loc: tuple[Any, ...]) -> str:
    """A pydantic location with list indices replaced by the item's own key (dimensions.0.key ->
    dimensions.persona_consistency.key), so the path names what the reader sees in the file."""
    parts, node = [], raw
    for step in loc:
        if isinstance(step, int) and isinstance(node, list) and 0 <= step < len(node):
            item = node[step]
            label = next(
                (str(item[k]) for k in ITEM_KEYS if isinstance(item, dict) and isinstance(item.get(k), str)), None
            )
            parts.append(label or str(step))
            node = item
            continue
        parts.append(str(step))
        node = node.get(step) if isinstance(node, dict) else None
    return ".".join(parts) or "<top level>"


def yaml_problem(path: Path, exc: yaml.YAMLError) -> str:
    """PyYAML's error as one line a reader can act on: ``<file>:<line>:<column>: not valid YAML: <problem> (while
    <context>, from line N)``."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if not problem or mark is None:
        return f"{path}: not valid YAML: {' '.join(str(exc).split())}"
    where = f"{path}:{mark.line + 1}:{mark.column + 1}"
    context, cmark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    why = (
        f" ({context}, from line {cmark.line + 1})"
        if context and cmark is not None
        else f" ({context})"
        if context
        else ""
    )
    return f"{where}: not valid YAML: {problem}{why}"


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (through lists, unions, dicts and Annotated)."""
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += models_in(arg)
    return out


def with_hint(error: Any, root: type[BaseModel]) -> str:
    """A validation error's message, and for a key the model does not know (``root`` or a model under it), the
    nearest one it does."""
    import difflib

    msg = str(error["msg"])
    loc = tuple(error["loc"])
    if error.get("type") != "extra_forbidden" or not loc or not isinstance(loc[-1], str):
        return msg
    models: list[type[BaseModel]] = [root]
    for step in loc[:-1]:
        if isinstance(step, int):
            continue
        nxt: list[type[BaseModel]] = []
        for m in models:
            field = m.model_fields.get(str(step))
            if field is not None:
                nxt += models_in(field.annotation)
        models = nxt or models
    known = sorted({name for m in models for name in m.model_fields})
    near = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
    return f"{msg}: did you mean {near[0]!r}?" if near else f"{msg} (known: {', '.join(known)})"


def problem_message(path: Path, problems: list[tuple[str, str]]) -> str:
    lines = [f"{path}: invalid rubric config ({len(problems)} problem(s))"]
    lines += [f"  - field '{where}': {what}" for where, what in problems]
    return "\n".join(lines)


SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's: 10× faster, the same mappings


def load_yaml(text: str) -> Any:
    """``yaml.safe_load``, through libyaml when PyYAML has it (every process that builds the definitions reads the
    five rubrics: 0.34 s of pure-Python parsing each time). Text libyaml refuses is read again by the Python
    loader, whose error (its wording, its place, a RecursionError for a value nested too deeply) is the one said."""
    try:
        return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506  # a safe loader, C or Python
    except yaml.YAMLError:
        if SAFE_LOADER is yaml.SafeLoader:
            raise
        return yaml.safe_load(text)
