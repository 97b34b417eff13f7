"""``promptfoo``: the JSON file ``promptfoo eval --output results.json`` writes (its results as
``results.results``, ``results.outputs`` in some versions' documentation, or a top-level list in older ones).

Each result is one test case under one prompt and provider. The fields a mapping can name: ``vars`` (the test
case's variables: ``vars.question``), ``prompt`` (the rendered prompt, ``prompt.raw``), ``prompt_label``,
``response`` (``response.output``, text; JSON output as its JSON text), ``provider`` (its id), ``testIdx``,
``promptIdx``, ``id`` (the test case and prompt, ``<testIdx>-<promptIdx>``: the same across runs of one config, so
a test case keeps its sample id from checkpoint to checkpoint), ``result_id`` (the result's own id, new each run).
A result with an error or no output is reported with its position. The model is the results' provider, where one
provider answered them all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from eval_pipeline.core.types import JSONObject
from eval_pipeline.ingest.importers.base import IMPORTERS, Format, ImportFailure, Record, obj, one_value


def _results(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ImportFailure(f"{path}: not a promptfoo results file: {str(exc).splitlines()[0]}") from None
    inner = data.get("results") if isinstance(data, dict) else None
    if isinstance(inner, dict):
        inner = inner.get("results", inner.get("outputs"))
    if not isinstance(inner, list):
        raise ImportFailure(f"{path}: not a promptfoo results file: no results list (results.results)")
    return inner


def read(path: Path, _extra: Path | None = None) -> Iterator[Record]:
    for n, item in enumerate(_results(path), 1):
        if not isinstance(item, dict):
            yield Record(n, {}, f"result {n} is not an object", path.name)
            continue
        prompt, test = obj(item.get("prompt")), obj(item.get("testCase"))
        provider = item.get("provider")
        values: JSONObject = {
            "vars": item.get("vars") or test.get("vars") or {},
            "prompt": prompt.get("raw"),
            "prompt_label": prompt.get("label"),
            "provider": provider.get("id") if isinstance(provider, dict) else provider,
            "testIdx": item.get("testIdx"),
            "promptIdx": item.get("promptIdx"),
            "id": f"{item.get('testIdx')}-{item.get('promptIdx')}",
            "result_id": item.get("id"),
        }
        response = obj(item.get("response"))
        output = response.get("output")
        if item.get("error") or response.get("error"):
            yield Record(
                n, values, f"promptfoo recorded an error: {item.get('error') or response.get('error')}", path.name
            )
            continue
        if output is None:
            yield Record(n, values, "no output", path.name)
            continue
        values["response"] = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        yield Record(n, values, None, path.name)


def model(_path: Path, records: Sequence[Record]) -> str | None:
    return one_value(records, "provider")


IMPORTERS.add("promptfoo", Format("promptfoo", read, "promptfoo eval --output results.json", model))
