"""Progress events from inside a run (a step starting or ending, judge calls answered) to whoever listens.

The CLI and the demo listen, to draw a progress line; nothing listens in a Dagster daemon or webserver run,
where emitting costs one attribute lookup. A listener that fails never fails the run.

``EVAL_STEP_LOG`` (a file) makes every process append one JSON line per step that ended, whatever launched it (the
CLI, the UI, the daemon, a worker): what an operator audits, and how the test suite counts the evaluations it
pays for (tests/conftest.py). Each line carries ``EVAL_STEP_CONTEXT`` as the process saw it when the step ended (a
label of the caller's: the suite's is the test that was running).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from eval_pipeline.core.types import JSONObject

Listener = Callable[[JSONObject], None]  # an event: kind, phase, rubric, asset, ...
_listeners: list[Listener] = []


def emit(kind: str, **fields: object) -> None:
    for listener in list(_listeners):
        try:
            listener({"kind": kind, **fields})
        except Exception:  # noqa: BLE001 - drawing progress must never fail an evaluation
            pass


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


_logging_to: set[str] = set()


def log_steps(path: str) -> None:
    """Append one JSON line per step that ends in this process to ``path`` (what ``EVAL_STEP_LOG`` does at import);
    once per path."""
    if path in _logging_to:
        return
    _logging_to.add(path)

    def append(event: JSONObject) -> None:
        if event.get("kind") == "step" and event.get("phase") == "end":
            fields = {k: event.get(k) for k in ("rubric", "asset", "checkpoint")}
            line = json.dumps(fields | {"pid": os.getpid(), "context": os.environ.get("EVAL_STEP_CONTEXT")})
            with open(path, "a") as f:  # one short append: whole lines from many processes
                f.write(line + "\n")

    _listeners.append(append)


if os.environ.get("EVAL_STEP_LOG"):
    log_steps(os.environ["EVAL_STEP_LOG"])
