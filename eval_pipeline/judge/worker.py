"""A judge worker process: ``python -m eval_pipeline.judge.worker``, started by eval_pipeline.judge.calls.

Started with ``subprocess`` (a fresh interpreter, never ``os.fork`` of a process where Dagster's threads run:
a fork can inherit a lock another thread holds and hang), once, and reused for every batch of calls the
process makes. Protocol, one JSON document per line:

- stdin, per batch: ``{"settings": JudgeSettings.to_json(), "specs": [{"key", "messages", "schema"}, ...]}``;
- stdout, per answer as it arrives: ``{"key": ..., <CallResult fields>}``, then ``{"stats": {...}}`` when the
  batch is done.

The worker leaves when its stdin closes (the parent is gone or done). The API key is read from the
environment it inherits, as in the parent; it is never on the command line or in the protocol.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict
from typing import TextIO

from eval_pipeline.core.types import JSONObject, Row
from eval_pipeline.judge.client import OpenAIJudgeClient
from eval_pipeline.judge.config import JudgeSettings


async def answer(settings: JudgeSettings, specs: list[Row], out: TextIO) -> None:
    """Call the endpoint for each spec and write one JSON line per result as it completes, then the stats."""
    client = OpenAIJudgeClient(settings)

    async def one(spec: JSONObject) -> None:
        res = await client.complete(spec["messages"], spec["schema"])
        out.write(json.dumps({"key": spec["key"], **asdict(res)}) + "\n")
        out.flush()

    try:
        await asyncio.gather(*(one(s) for s in specs))
    finally:
        await client.close()
    out.write(json.dumps({"stats": asdict(client.stats)}) + "\n")
    out.flush()


def main() -> int:
    out, sys.stdout = sys.stdout, sys.stderr  # the pipe carries the protocol only: stray prints go to stderr
    for line in sys.stdin:  # one batch a line, until the parent closes the pipe
        batch = json.loads(line)
        asyncio.run(answer(JudgeSettings.from_json(batch["settings"]), batch["specs"], out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
