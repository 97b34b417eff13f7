"""`eval-pipeline batches`: the judge's Batch API submissions (``main.judge_batches``): list them, show one (as the
provider says it stands now, and what became of its prompts), cancel one. A cancelled batch's answers are kept
and its other prompts asked once more when its checkpoint is evaluated again (judge.batch)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from eval_pipeline.cli.common import CliError, Parents, Subcommands

if TYPE_CHECKING:
    from eval_pipeline.core.types import Row
    from eval_pipeline.storage.warehouse import Warehouse


def cmd_batches(args: argparse.Namespace) -> int:
    """The judge's Batch API batches (EVAL_JUDGE_MODE=batch): list, show one, cancel one."""
    from eval_pipeline.storage.warehouse import Warehouse

    wh = Warehouse(args.warehouse, read_only=True, lock_timeout_s=3)
    try:
        if args.action == "list":
            return _list(wh, args.all)
        sub = _find(wh, args.batch)
    finally:
        wh.close()
    return _show(sub) if args.action == "show" else _cancel(sub)


def _list(wh: Warehouse, every: bool) -> int:
    from eval_pipeline.judge.batch.provider import standing_of
    from eval_pipeline.judge.batch.records import OPEN, submissions

    standing, unreachable = standing_of(submissions(wh, states=OPEN))
    for line in unreachable:
        print(f"(could not ask {line}; its batches as recorded)", flush=True)
    subs = [_now(s, standing) for s in submissions(wh, states=() if every else OPEN)]
    if not subs:
        print("no judge batch open" if not every else "no judge batch submitted", flush=True)
        return 0
    print(f"{'batch':<24} {'state':<12} {'done':>11}  {'rubric':<20} {'checkpoint':<14} step", flush=True)
    for s in subs:
        done = f"{int(s['completed'] or 0) + int(s['failed'] or 0)}/{int(s['requests'])}"
        name = str(s["batch_id"] or s["submission_id"])
        print(f"{name:<24} {s['state']:<12} {done:>11}  {s['rubric']:<20} {s['checkpoint_id']:<14} {s['step']}")
    return 0


def _now(sub: Row, standing: Mapping[str, object]) -> Row:
    """``sub`` with its provider's state and counts now, when it was asked."""
    from eval_pipeline.judge.batch.records import WORKING

    batch = standing.get(str(sub.get("batch_id")))
    if batch is None or sub["state"] not in WORKING:  # the provider may still be working on it: asked
        return sub
    counts = getattr(batch, "request_counts", None)
    return {
        **sub,
        "state": getattr(batch, "status", sub["state"]),
        "completed": counts.completed if counts else sub["completed"],
        "failed": counts.failed if counts else sub["failed"],
    }


def _find(wh: Warehouse, wanted: str | None) -> Row:
    from eval_pipeline.judge.batch.records import submissions

    if not wanted:
        raise CliError("name the batch: `eval-pipeline batches show <batch id>` (`eval-pipeline batches` lists them)")
    for s in submissions(wh):
        if wanted in (s["batch_id"], s["submission_id"]):
            return s
    raise CliError(f"no judge batch {wanted!r} (`eval-pipeline batches --all` lists them)")


@contextlib.contextmanager
def _reaching(sub: Row) -> Iterator[None]:
    """Within: an endpoint that does not answer is one line naming it (the client says only "Connection error.")."""
    import openai

    try:
        yield
    except openai.APIConnectionError as exc:
        where = str(sub.get("base_url") or "") or "https://api.openai.com/v1"
        raise CliError(
            f"the judge endpoint {where} did not answer ({exc}); is it up? (the batch's endpoint, recorded when it "
            "was submitted)"
        ) from None


def _show(sub: Row) -> int:
    from eval_pipeline.judge.batch import LOST_LOOKS, pending_text
    from eval_pipeline.judge.batch.provider import Provider

    now = None
    if sub.get("batch_id"):
        with Provider(str(sub["base_url"] or "") or None) as p, _reaching(sub):
            now = p.retrieve(str(sub["batch_id"]))
    for key in ("batch_id", "submission_id", "rubric", "checkpoint_id", "step", "judge", "model", "round"):
        print(f"{key:<16} {sub.get(key)}")
    print(f"{'recorded':<16} {sub['state']} ({pending_text(sub).split(' (', 1)[-1].rstrip(')')})")
    if now is not None:
        c = now.request_counts
        done = (c.completed + c.failed) if c else 0
        print(f"{'provider says':<16} {now.status} ({done} of {c.total if c else '?'} done)")
    elif sub.get("batch_id"):
        print(
            f"{'provider says':<16} not found now (a batch is lost only when {LOST_LOOKS} looks in a row do not find "
            "it: its prompts are then asked again when its checkpoint is)"
        )
    for key in ("reserved_cost", "cost", "online_cost", "currency", "reason"):
        if sub.get(key) is not None:
            print(f"{key:<16} {sub[key]}")
    return 0


def _cancel(sub: Row) -> int:
    from eval_pipeline.judge.batch.provider import Provider

    if not sub.get("batch_id"):
        raise CliError(f"judge batch {sub['submission_id']} was never created at the provider: nothing to cancel")
    with Provider(str(sub["base_url"] or "") or None) as p, _reaching(sub):
        batch = p.cancel(str(sub["batch_id"]))
    print(
        f"judge batch {batch.id}: {batch.status}; its answers are kept and the rest asked once more when "
        f"{sub['checkpoint_id']} is evaluated again",
        flush=True,
    )
    return 0


def add_parsers(sub: Subcommands, parents: Parents) -> None:
    """This module's commands, on the command's parser."""
    bt = parents.command(sub, cmd_batches, reads=True)
    bt.add_argument(
        "action",
        nargs="?",
        choices=("list", "show", "cancel"),
        default="list",
        help="list the open batches (default), show one as the provider says it stands, or cancel one",
    )
    bt.add_argument("batch", nargs="?", help="the batch id (show, cancel)")
    bt.add_argument("--all", action="store_true", help="list every batch, collected ones too")
