"""The rubric YAML reference, written from the code itself: the config models (every field, its type, default and
description) and the registries (metrics and heuristic features with their typed parameters, gate kinds with the
fields each requires, derived-score kinds, judge backends). ``eval-pipeline reference`` writes it to
``docs/rubric-reference.md``; a test fails when the committed file differs from what the code says.
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.derived import KINDS
from eval_pipeline.core.params import params_model
from eval_pipeline.judge.backends import BACKENDS
from eval_pipeline.judge.heuristic import load_features
from eval_pipeline.metrics import METRICS
from eval_pipeline.scoring.gates import load_kinds
from eval_pipeline.scoring.gates.base import GateSpec

HEAD = """# Rubric YAML reference

Generated from the code by `eval-pipeline reference` (do not edit by hand: `make reference` rewrites it, and a test
fails when it is out of date). A rubric is one YAML file in `rubric_configs/`; unknown keys are refused everywhere.
How a rubric becomes an asset group: [how-it-works.md](how-it-works.md); adding a unit: [extending.md](extending.md).
"""


def _type(annotation: Any) -> str:
    """A field's type as a reader of YAML sees it."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = args[0]
        if typing.get_origin(inner) in (typing.Union, types.UnionType) and any(
            isinstance(a, type) and issubclass(a, BaseModel) for a in typing.get_args(inner)
        ):
            return "one of the kinds below"
        return _type(inner)
    if origin in (typing.Union, types.UnionType):
        shown = [_type(a) for a in args if a is not type(None)]
        return " or ".join(shown) + (" (or null)" if type(None) in args else "")
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}" if args else "mapping"
    if origin is typing.Literal:
        return " / ".join(repr(a) for a in args)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"`{annotation.__name__}`"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(its defaults)"
    return "none" if value is None else f"`{value!r}`"


def _doc(obj: object) -> str:
    """The first paragraph of ``obj``'s own docstring (not one it inherits)."""
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    doc = inspect.cleandoc(doc or "")
    return " ".join(doc.split("\n\n")[0].split())


def _fields_table(model: type[BaseModel], skip: tuple[str, ...] = ()) -> list[str]:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        meaning = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | {_type(field.annotation)} | {_default(field)} | {meaning} |")
    return rows if len(rows) > 2 else ["(no fields)"]


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """Every config model reachable from ``root``, in the order they are first met."""
    seen: list[type[BaseModel]] = []

    def walk(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in seen and annotation.__module__.startswith("eval_pipeline.core.config"):
                seen.append(annotation)
                for f in annotation.model_fields.values():
                    walk(f.annotation)
            return
        for a in typing.get_args(annotation):
            walk(a)

    walk(root)
    return seen


def _unit_section(title: str, intro: str, units: list[tuple[str, str, list[str]]]) -> list[str]:
    out = [f"## {title}", "", intro, ""]
    for name, doc, table in units:
        out += [f"### `{name}`", ""] + ([doc, ""] if doc else []) + table + [""]
    return out


def reference() -> str:
    """The whole reference as Markdown."""
    out = [HEAD, "## The rubric file", ""]
    for model in _models(RubricConfig):
        out += [f"### `{model.__name__}`", ""]
        doc = _doc(model)
        if doc and not doc.startswith("!!!") and model.__doc__ is not None:
            out += [doc, ""]
        out += _fields_table(model) + [""]
    metrics = [
        (name, _doc(METRICS[name]), ["Parameters (`metrics: - function: " + name + "`, `params:`):", ""]
         + _fields_table(params_model(METRICS[name])))
        for name in sorted(METRICS)
    ]  # fmt: skip
    out += _unit_section(
        "Metric functions",
        "Deterministic per-sample metrics (`metrics:`). Each declares its parameters; the loader refuses unknown "
        "names and values of another type.",
        metrics,
    )
    features = load_features()
    out += _unit_section(
        "Heuristic features",
        "What the offline judge estimates a dimension from (`heuristic:` on a dimension: `feature`, `weight`, "
        "`params`). Each returns a value in [0, 1].",
        [(n, _doc(features[n]), _fields_table(params_model(features[n]))) for n in sorted(features)],
    )
    kinds = load_kinds()
    gate_units = []
    for name in sorted(kinds):
        kind = kinds[name]
        own = [
            f
            for f, field in kind.spec.model_fields.items()
            if f not in GateSpec.model_fields or repr(field) != repr(GateSpec.model_fields[f])
        ]
        doc = _doc(kind.fn) or _doc(inspect.getmodule(kind.fn))
        doc += f" Reads: {', '.join(kind.needs)}." if kind.needs else ""
        own_fields = [f for f in own if f != "params"]
        table = (
            ["Fields as this kind needs them:", ""]
            + _fields_table(kind.spec, skip=tuple(f for f in kind.spec.model_fields if f not in own_fields))
            + [""]
            if own_fields
            else []
        )
        params = kind.spec.model_fields["params"].annotation
        if isinstance(params, type) and issubclass(params, BaseModel):
            table += ["`params`:", ""] + _fields_table(params) + [""]
        gate_units.append((name, doc.strip(), table))
    out += _unit_section(
        "Gate kinds",
        "Threshold gates (`gates:`), each an asset check. Every gate has these fields; a kind may require some "
        "of them (its own fields below) and read `params`:\n\n" + "\n".join(_fields_table(GateSpec)),
        gate_units,
    )
    out += _unit_section(
        "Derived-score kinds",
        "Scores computed from other scores (`derived:`, chosen by `kind`).",
        [(n, _doc(KINDS[n]), _fields_table(KINDS[n], skip=("kind",))) for n in sorted(KINDS)],
    )
    out += _unit_section(
        "Judge backends",
        "Who judges (`EVAL_JUDGE`): the rubric's panel (`panel:`) is asked through the chosen backend.",
        [(n, _doc(BACKENDS[n]) or _doc(inspect.getmodule(BACKENDS[n])), []) for n in sorted(BACKENDS)],
    )
    return "\n".join(out).rstrip() + "\n"
