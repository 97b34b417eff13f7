"""Waiting for an event in a test: a bound on how often it is asked for, never a clock read and compared.

A test waits for something to happen (a run to finish, a page to show a word, a server to answer); it never
measures how long that took (a speed promise is a ratio in bench/). The bound keeps a test whose event never
comes from waiting forever; pytest-timeout bounds the whole test besides.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


def poll(until: Callable[[], object], seconds: float, every: float = 0.1) -> bool:
    """Ask ``until()`` every ``every`` s until it is true, at most ``seconds / every`` times (and once more at the
    end); whether it came true. ``until`` may do work of its own (read a log, fetch a page): the bound is on asks."""
    for _ in range(max(1, math.ceil(seconds / every))):
        if until():
            return True
        time.sleep(every)
    return bool(until())
