"""Typed parameters of a registered function (a metric, a heuristic feature).

A unit declares its parameters as a ``Params`` model (a frozen pydantic model that forbids unknown names and
checks types strictly: ``"3"`` is not a number, ``True`` is not one either) and is registered with it
(``@metric("name", params=MyParams)``). The rubric loader checks a YAML's ``params`` against the model
(``problems``); the function receives the validated model, however it is called (``typed``): a dict is validated
once and the model kept for that dict, so a feature called for every sample pays for the validation once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from eval_pipeline.core.types import JSONObject

F = TypeVar("F", bound=Callable[..., Any])
SEEN_LIMIT = 256  # validated dicts a unit remembers


class Params(BaseModel):
    """Base of every unit's parameters: unknown names and values of another type are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class NoParams(Params):
    """A unit that takes no parameters."""


def problems(model: type[Params], params: JSONObject) -> list[str]:
    """What is wrong with ``params`` for a unit whose parameters are ``model``: unknown names (with the known
    ones), values of another type, required ones missing."""
    try:
        model.model_validate(params)
    except ValidationError as e:
        known = ", ".join(model.model_fields) or "none"
        out = []
        for err in e.errors():
            where = ".".join(str(x) for x in err["loc"] if not isinstance(x, int)) or "params"
            name = str(err["loc"][0]) if err["loc"] else where
            if err["type"] == "extra_forbidden":
                out.append(f"unknown parameter {name!r} (it takes: {known})")
            elif err["type"] == "missing":
                out.append(f"parameter {name!r} is required")
            else:
                field = model.model_fields.get(name)
                want = getattr(field.annotation, "__name__", str(field.annotation)) if field else "?"
                got = err.get("input")
                out.append(f"parameter {where!r} should be {want}, got {type(got).__name__} {got!r}: {err['msg']}")
        return list(dict.fromkeys(out))
    return []


def typed(model: type[Params], position: int = 1) -> Callable[[F], F]:
    """Decorator: the function's parameter at ``position`` arrives as ``model``, whether the caller passes the
    model or a dict (validated once per dict object; the dicts are a rubric's, which do not change)."""

    def wrap(fn: F) -> F:
        seen: dict[int, tuple[JSONObject, Params]] = {}

        @functools.wraps(fn)
        def call(*args: Any) -> Any:
            raw = args[position]
            if not isinstance(raw, model):
                hit = seen.get(id(raw))
                if hit is None or hit[0] is not raw:
                    hit = (raw, model.model_validate(raw or {}))
                    if len(seen) >= SEEN_LIMIT:  # the dicts of the rubrics in use; never more than a few dozen
                        seen.clear()
                    seen[id(raw)] = hit
                args = (*args[:position], hit[1], *args[position + 1 :])
            return fn(*args)

        call.params_model = model  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap


def params_model(fn: Callable[..., Any]) -> type[Params]:
    """The parameters a registered function declared (``NoParams`` when it declared none)."""
    return getattr(fn, "params_model", NoParams)
