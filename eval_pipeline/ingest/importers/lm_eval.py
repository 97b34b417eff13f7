"""``lm-eval``: lm-evaluation-harness ``--log_samples`` files (``samples_<task>_<time>.jsonl``, or ``.jsonl.gz``).

Each line is one document of a task. The fields a mapping can name: ``doc_id``, ``doc`` (the task's own document:
``doc.question`` and the like), ``target``, ``filter``, ``prompt`` (the first request's input, from either shape of
``arguments``: ``{"gen_args_0": {"arg_0": …, "arg_1": …}}`` in newer harnesses, ``[[…, …]]`` in older ones),
``messages`` (that prompt as chat messages, where the harness applied a chat template), ``response`` (the first
filtered response, else the first raw one), ``resps``, ``filtered_resps``. A line with no response is reported, not
imported. The model is the run's: ``model_name`` of the ``results_<time>.json`` of the same run beside the file
(its revision after ``@`` where the model arguments name one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from eval_pipeline.ingest.importers.base import IMPORTERS, Format, Record
from eval_pipeline.ingest.importers.lines import json_lines


def _first_request(arguments: Any) -> tuple[Any, Any]:
    if isinstance(arguments, dict):
        first = next(iter(arguments.values()), None)
        if isinstance(first, dict):
            context = first.get("arg_0")
            if isinstance(context, list) and len(context) == 1 and isinstance(context[0], str):
                context = context[0]  # a chat model's request: its messages as one JSON text in a list
            return context, first.get("arg_1")
        return None, None
    if isinstance(arguments, list) and arguments:
        first = arguments[0]
        if isinstance(first, list | tuple) and first:
            return first[0], first[1] if len(first) > 1 else None
        return first, None
    return None, None


def _text(value: Any) -> str | None:
    """The first string in ``value`` (a response list nests one level per filter)."""
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else None


def read(path: Path, _extra: Path | None = None) -> Iterator[Record]:
    for n, obj, why in json_lines(path):
        if obj is None:
            yield Record(n, {}, why, path.name)
            continue
        prompt, _ = _first_request(obj.get("arguments"))
        values = dict(obj)
        values["prompt"] = prompt
        if isinstance(prompt, str) and prompt.lstrip().startswith("["):
            try:
                messages = json.loads(prompt)
            except ValueError:
                messages = None
            if isinstance(messages, list):
                values["messages"] = messages
        response = _text(obj.get("filtered_resps")) or _text(obj.get("resps"))
        if response is None:
            yield Record(n, values, "no response (resps and filtered_resps hold no text)", path.name)
            continue
        values["response"] = response
        yield Record(n, values, None, path.name)


def results_files(path: Path) -> list[Path]:
    """The ``results_<time>.json`` files that may describe ``samples_<task>_<time>.jsonl``: the one of its own run
    (the same time) first, then the others beside it, newest first (one output folder holds every run of a
    model: a revision each)."""
    stem = path.name.removesuffix(".gz").removesuffix(".jsonl")
    beside = sorted(path.parent.glob("results_*.json"), reverse=True)
    own = [p for p in beside if stem.endswith("_" + p.stem.removeprefix("results_"))]
    return own + [p for p in beside if p not in own]


def model(path: Path, _records: Sequence[Record] = ()) -> str | None:
    """The run's model from its ``results_<time>.json`` (``results_files``)."""
    for results in results_files(path):
        try:
            data = json.loads(results.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        name = data.get("model_name") or ""
        given = (data.get("config") or {}).get("model_args") or ""
        if isinstance(given, dict):  # newer harnesses record the arguments as an object
            parts = {str(k): str(v) for k, v in given.items() if v is not None}
        else:
            parts = dict(p.split("=", 1) for p in str(given).split(",") if "=" in p)
        name = name or parts.get("pretrained") or parts.get("model") or ""
        revision = parts.get("revision")
        if name:
            return f"{name}@{revision}" if revision and revision != "main" else str(name)
    return None


IMPORTERS.add("lm-eval", Format("lm-eval", read, "lm-evaluation-harness --log_samples samples_*.jsonl[.gz]", model))
