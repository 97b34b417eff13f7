"""The parameters a registered function (a metric, a heuristic feature) reads, derived from its own code.

A metric or feature takes its parameters as a dict and reads each with ``params.get("name", default)`` (or
``params["name"]`` when it is required). This module reads those calls from the function's source, and from
the functions it passes the dict on to, so the rubric loader can refuse a parameter the function never reads
(``statment_field``) or a value whose type differs from the default's, without each function declaring its
parameters a second time.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any


@dataclass(frozen=True)
class Param:
    name: str
    required: bool
    kind: type | None  # the type of the default (None: any)


_KINDS: dict[type, tuple[type, ...]] = {
    str: (str,),
    float: (int, float),
    int: (int, float),
    bool: (bool,),
    list: (list,),
    dict: (dict,),
}


def _default_kind(node: ast.expr | None) -> type | None:
    if isinstance(node, ast.Constant) and node.value is not None:
        return type(node.value)
    if isinstance(node, ast.List):
        return list
    if isinstance(node, ast.Dict):
        return dict
    return None


def _passes(arg: ast.expr, pname: str) -> bool:
    """The params dict handed on: as itself, or spread into a dict literal ({**params, ...})."""
    if isinstance(arg, ast.Name):
        return arg.id == pname
    return isinstance(arg, ast.Dict) and any(
        k is None and isinstance(v, ast.Name) and v.id == pname for k, v in zip(arg.keys, arg.values)
    )


@cache
def signature(fn: Callable[..., Any]) -> dict[str, Param]:
    """Parameter name -> Param, for a function whose second argument is the params dict."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return {}
    func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)
    if func is None or len(func.args.args) < 2:
        return {}
    pname = func.args.args[1].arg
    names = dict(fn.__globals__)
    for node in ast.walk(func):  # functions imported inside the body
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            names.update({a.asname or a.name: getattr(module, a.name, None) for a in node.names})
    out: dict[str, Param] = {}
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == pname
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            name = str(node.args[0].value)
            out[name] = Param(name, False, _default_kind(node.args[1] if len(node.args) > 1 else None))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == pname
            and isinstance(node.slice, ast.Constant)
        ):
            name = str(node.slice.value)
            out.setdefault(name, Param(name, True, None))
        elif isinstance(node, ast.Call) and any(_passes(a, pname) for a in node.args):
            callee = node.func.id if isinstance(node.func, ast.Name) else None
            target = names.get(callee) if callee else None
            if callable(target) and target is not fn:
                for name, param in signature(target).items():
                    out.setdefault(name, Param(name, False, param.kind))
    return out


def problems(fn: Callable[..., Any], params: dict[str, Any]) -> list[str]:
    """What is wrong with ``params`` for ``fn``: names it never reads, values of another type than the default's.
    (A parameter read with ``params["name"]`` may be needed only on some paths, so its absence is not judged here.)"""
    sig = signature(fn)
    if not sig and not params:
        return []
    out = [f"unknown parameter {k!r} (it reads: {', '.join(sorted(sig)) or 'none'})" for k in params if k not in sig]
    for k, v in params.items():
        p = sig.get(k)
        if p is not None and p.kind is not None and v is not None:
            ok = _KINDS.get(p.kind, (p.kind,))
            if not isinstance(v, ok) or (isinstance(v, bool) and bool not in ok):
                out.append(f"parameter {k!r} should be {p.kind.__name__}, got {type(v).__name__} {v!r}")
    return out
