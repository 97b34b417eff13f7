"""``openai-batch``: an OpenAI (or vLLM) Batch API input file and its output file, paired by ``custom_id``.

The input file's lines are the requests (``{"custom_id", "method", "url", "body": {"model", "messages", …}}``), the
output file's the answers (``{"custom_id", "response": {"status_code", "body": {"choices": …}}, "error"}``). The
fields a mapping can name, per request: ``custom_id``, ``body`` (``body.model`` and the like), ``messages``,
``system`` (the system message's text), ``prompt`` (the last user message's text), ``response`` (the answer's first
choice: its message's content, or its text for a completion). A request without an answer, an answer with an error
or a status other than 200, and an answer to no request are reported with their file and line. The model is the
requests' ``body.model`` (``model``), where they all name one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eval_pipeline.core.types import JSONObject
from eval_pipeline.ingest.importers.base import IMPORTERS, Format, ImportFailure, Record, obj
from eval_pipeline.ingest.importers.lines import json_lines


def _content(message: Any) -> str | None:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else None


def _answer(out: JSONObject) -> tuple[str | None, str | None]:
    """(the answer's text, why there is none)."""
    if out.get("error"):
        error = out["error"]
        return None, f"the batch recorded an error: {error.get('message', error) if isinstance(error, dict) else error}"
    response = obj(out.get("response"))
    status = response.get("status_code")
    if status != 200:
        return None, f"status {status}"
    choices = obj(response.get("body")).get("choices") or []
    if not choices:
        return None, "no choices in the answer"
    first = choices[0]
    text = _content(first.get("message")) if isinstance(first, dict) else None
    if text is None and isinstance(first, dict) and isinstance(first.get("text"), str):
        text = first["text"]
    return (text, None) if text is not None else (None, "no text in the answer's first choice")


def read(path: Path, extra: Path | None) -> Iterator[Record]:
    if extra is None:
        raise ImportFailure("openai-batch needs the output file too: --output FILE")
    answers: dict[str, tuple[int, JSONObject]] = {}
    for n, answer, why in json_lines(extra):
        if answer is None:
            yield Record(n, {}, why, extra.name)
            continue
        cid = answer.get("custom_id")
        if not isinstance(cid, str):
            yield Record(n, {}, "an answer without a custom_id", extra.name)
        elif cid in answers:
            yield Record(n, {}, f"a second answer to {cid!r} (line {answers[cid][0]} kept)", extra.name)
        else:
            answers[cid] = (n, answer)
    asked: set[str] = set()
    for n, line, why in json_lines(path):
        if line is None:
            yield Record(n, {}, why, path.name)
            continue
        cid = line.get("custom_id")
        body = obj(line.get("body"))
        messages: list[Any] = body["messages"] if isinstance(body.get("messages"), list) else []
        values: JSONObject = {"custom_id": cid, "body": body, "messages": messages, "model": body.get("model")}
        system = [_content(m) for m in messages if isinstance(m, dict) and m.get("role") == "system"]
        users = [_content(m) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if system and system[0] is not None:
            values["system"] = system[0]
        if users and users[-1] is not None:
            values["prompt"] = users[-1]
        elif isinstance(body.get("prompt"), str):
            values["prompt"] = body["prompt"]
        if not isinstance(cid, str):
            yield Record(n, values, "a request without a custom_id", path.name)
            continue
        asked.add(cid)
        if cid not in answers:
            yield Record(n, values, f"no answer to {cid!r} in {extra.name}", path.name)
            continue
        text, why_not = _answer(answers[cid][1])
        if text is None:
            yield Record(n, values, f"{why_not} ({extra.name} line {answers[cid][0]})", path.name)
            continue
        values["response"] = text
        yield Record(n, values, None, path.name)
    for cid, (n, _) in answers.items():
        if cid not in asked:
            yield Record(n, {}, f"an answer to {cid!r}, which no request asked", extra.name)


IMPORTERS.add(
    "openai-batch",
    Format(
        "openai-batch",
        read,
        "OpenAI/vLLM Batch API input file, with --output its output file",
        needs_extra="output",
    ),
)
