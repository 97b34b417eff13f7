"""``inspect``: Inspect AI eval logs (``.eval`` and ``.json``), read through Inspect's own reader
(``inspect_ai.log.read_eval_log``: its log format is versioned, not a frozen spec, so the reader is the stable
surface). Inspect is an optional extra: ``pip install 'eval_pipeline[inspect]'``.

Each sample of the log (each epoch of it) is one record, numbered in the log's order. The fields a mapping can name:
``id`` (the sample's id; ``<id>#<epoch>`` when the log ran several epochs), ``sample_id`` and ``epoch`` (as Inspect
records them), ``input`` (the input's text: the string, or the last user message's text), ``messages`` (the
conversation as ``{role, content}`` with text content), ``target``, ``metadata`` (the sample's), ``response`` (the
output's completion), ``scores`` (each scorer's value: ``scores.match``), ``model``. A sample that ended in an error
or has no completion is reported with its number (its failure message). The model is the log's ``eval.model``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eval_pipeline.core.types import JSONObject
from eval_pipeline.ingest.importers.base import IMPORTERS, Format, ImportFailure, Record

EXTRA = "pip install 'eval_pipeline[inspect]'"


def _log(path: Path) -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ImportFailure(f"the inspect format reads logs with Inspect's own reader: {EXTRA}") from None
    try:
        return read_eval_log(str(path))
    except Exception as exc:  # noqa: BLE001 - Inspect's errors are many: one line naming the file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ImportFailure(f"{path}: not an Inspect eval log: {first}") from None


def _text(message: Any) -> str:
    text = getattr(message, "text", None)
    return text if isinstance(text, str) else str(getattr(message, "content", ""))


def read(path: Path, _extra: Path | None = None) -> Iterator[Record]:
    log = _log(path)
    samples = log.samples
    if samples is None:
        raise ImportFailure(f"{path}: the Inspect log holds no samples (a header-only log: run with samples kept)")
    epochs = max((getattr(s, "epoch", 1) or 1 for s in samples), default=1)
    model = str(log.eval.model)
    for n, s in enumerate(samples, 1):
        messages = [{"role": m.role, "content": _text(m)} for m in (s.messages or [])]
        users = [m["content"] for m in messages if m["role"] == "user"]
        given = s.input if isinstance(s.input, str) else (users[-1] if users else None)
        values: JSONObject = {
            "id": f"{s.id}#{s.epoch}" if epochs > 1 else s.id,
            "sample_id": s.id,
            "epoch": s.epoch,
            "input": given,
            "messages": messages,
            "target": s.target,
            "metadata": dict(s.metadata or {}),
            "scores": {name: score.value for name, score in (s.scores or {}).items()},
            "model": model,
        }
        if s.error is not None:
            message = str(getattr(s.error, "message", s.error)).strip().splitlines()
            yield Record(
                n, values, f"the sample failed in Inspect: {message[0] if message else 'no message'}", path.name
            )
            continue
        completion = s.output.completion if s.output is not None else None
        if not completion:
            yield Record(n, values, "no completion in the sample's output", path.name)
            continue
        values["response"] = completion
        yield Record(n, values, None, path.name)


IMPORTERS.add("inspect", Format("inspect", read, f"Inspect AI eval logs, .eval or .json ({EXTRA})"))
