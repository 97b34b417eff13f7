"""Progress events from inside a run (a step starting or ending, judge calls answered) to whoever listens.

The CLI and the demo listen, to draw a progress line; nothing listens in a Dagster daemon or webserver run,
where emitting costs one attribute lookup. A listener that fails never fails the run.
"""

from __future__ import annotations

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
