"""The progress line of a running command."""

from __future__ import annotations

import sys
import time
from typing import IO

from eval_pipeline.core.types import JSONObject


class Progress:
    """A listener for progress events: on a terminal one status line, redrawn; elsewhere a plain line when
    a rubric's judging ends (calls, cache hits, missing)."""

    def __init__(self, stream: IO[str] | None = None, prefix: str = ""):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.prefix = prefix
        self.step = ""
        self._drawn = 0.0

    def __call__(self, event: JSONObject) -> None:
        if event["kind"] == "step" and event.get("phase") == "start":
            self.step = f"{event['rubric']} · {event['asset']}"
            self._draw(self.step)
        elif event["kind"] == "judge":
            done, total = event["done"], event["total"]
            rate = event["calls"] / event["seconds"] if event["seconds"] > 0 else 0.0
            if self.tty:
                width = 24
                filled = int(width * done / total) if total else width
                bar = "█" * filled + "░" * (width - filled)
                self._draw(
                    f"{self.step} {bar} {done}/{total} · {rate:.1f}/s · cache {event['hits']} · "
                    f"missing {event['missing']}",
                    force=done == total,
                )
            elif done == total and event["calls"]:
                self.stream.write(
                    f"{self.prefix}  {event['rubric']}: judged {total} prompts, {event['calls']} calls "
                    f"({rate:.1f}/s), {event['hits']} cached, {event['missing']} missing\n"
                )
                self.stream.flush()

    def _draw(self, text: str, force: bool = False) -> None:
        if not self.tty:
            return
        now = time.monotonic()
        if force or now - self._drawn > 0.1:
            self._drawn = now
            self.stream.write(f"\r\033[K{self.prefix}{text}"[:200])
            self.stream.flush()

    def clear(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()
