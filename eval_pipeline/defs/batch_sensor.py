"""The judge-batch sensor: results of the provider's Batch API land by themselves.

Every ``EVAL_JUDGE_BATCH_POLL`` seconds it reads the submissions not yet collected (``main.judge_batches``, read
only) and asks each endpoint how its batches stand, from as few requests as it can (the batch list, then one
request per batch it did not find). A batch that ended (completed, expired, cancelled, failed, or lost by the
provider), and a submission a killed process left before its batch was created (``LEFT_BEHIND_S`` after its last
step), is *due*: one run per checkpoint
and rubric re-materializes the judge steps that wait on it and everything downstream of them in the checkpoint's
partition (the steps read the results, judge.batch; the assets across checkpoints follow by their automation
condition). A batch still working is reported on its judge step's asset as an observation ("judge batch … in
progress (n of N done)"), once per change. ``eval-pipeline run --wait`` asks the same question (``due``) and
launches the same runs.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import dagster as dg

from eval_pipeline.core import settings
from eval_pipeline.core.types import Row
from eval_pipeline.defs.automation import runs_mark
from eval_pipeline.judge.batch import pending_text
from eval_pipeline.judge.batch.provider import standing_of
from eval_pipeline.judge.batch.records import ENDED, LOST, OPEN, PREPARING, UPLOADED, submissions
from eval_pipeline.storage.warehouse import Warehouse

SENSOR = "judge_batch_sensor"


@dataclass
class Standing:
    """What the open submissions come to: per (rubric, checkpoint) the judge steps due and the submissions that
    make them due; the submissions still working, as the provider now says they stand."""

    due: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    due_ids: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    working: list[Row] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)  # endpoints that could not be asked (said, not raised)


def due(wh: Warehouse, checkpoints: set[str] | None = None, timeout_s: float = 30.0) -> Standing:
    """The open submissions (of ``checkpoints``; None: all), each asked about at its endpoint (none before the
    warehouse exists)."""
    out = Standing()
    if not wh.exists():  # nothing evaluated yet: nothing submitted
        return out
    subs = [s for s in submissions(wh, states=OPEN) if checkpoints is None or s["checkpoint_id"] in checkpoints]
    asked = []
    for sub in subs:
        if sub["state"] in (PREPARING, UPLOADED) or not sub.get("batch_id"):
            if _left_behind(sub):  # a process was killed before the batch was created: a run resumes it
                _mark_due(out, sub)
        else:
            asked.append(sub)
    now, out.unreachable = standing_of(asked, timeout_s)
    for sub in asked:
        if str(sub["batch_id"]) not in now:  # its endpoint could not be asked: said, asked again next time
            continue
        batch = now[str(sub["batch_id"])]
        if batch is None or batch.status in ENDED or sub["state"] in (*ENDED, LOST):
            _mark_due(out, sub)
            continue
        counts = batch.request_counts
        out.working.append(
            {
                **sub,
                "state": batch.status,
                "completed": counts.completed if counts else 0,
                "failed": counts.failed if counts else 0,
            }
        )
    return out


LEFT_BEHIND_S = 600  # a submission not yet created this long after its last step: its process is gone


def _left_behind(sub: Row) -> bool:
    """A submission its process left before the batch was created (a live one passes those steps in seconds: a
    run launched for it meanwhile would send it a second time)."""
    updated = sub.get("updated_at")
    if not isinstance(updated, dt.datetime):
        return True
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    return (now - updated).total_seconds() > LEFT_BEHIND_S


def _mark_due(out: Standing, sub: Row) -> None:
    where = (str(sub["rubric"]), str(sub["checkpoint_id"]))
    out.due.setdefault(where, set()).add(str(sub["step"]))
    out.due_ids.setdefault(where, []).append(str(sub["submission_id"]))


def downstream_of(
    assets: Sequence[object], keys: Sequence[dg.AssetKey], among: Sequence[dg.AssetKey]
) -> list[dg.AssetKey]:
    """``keys`` and every asset of ``assets`` (a rubric group's definitions) downstream of them that is in
    ``among`` (what a checkpoint's evaluation materializes): the checkpoint's own assets and the decisions across
    checkpoints, so a batch that ended is taken up in one run, as a landing is."""
    children: dict[dg.AssetKey, set[dg.AssetKey]] = {}
    for a in assets:
        if not isinstance(a, dg.AssetsDefinition):
            continue
        for key in a.keys:
            for parent in a.asset_deps.get(key, set()):
                children.setdefault(parent, set()).add(key)
    found, todo = set(keys), list(keys)
    while todo:
        for child in children.get(todo.pop(), set()) - found:
            found.add(child)
            todo.append(child)
    return sorted(found & set(among), key=lambda k: k.to_user_string())


IDLE = "idle since"  # the cursor's key when no batch was open: the run that changed last then


def build_batch_sensor(
    steps: Mapping[str, Mapping[str, list[dg.AssetKey]]], warehouse: str | None, minimum_interval_seconds: float = 60
) -> dg.SensorDefinition:
    """``steps``: per rubric, per judge step (its table), the assets a run re-materializes when a batch of that
    step is due (downstream_of). When its last look found no batch open, it does not look (no warehouse opened)
    until a run changed: only a run opens a batch."""
    every = sorted({k for by_step in steps.values() for keys in by_step.values() for k in keys}, key=str)

    @dg.sensor(
        name=SENSOR,
        description="Polls the judge's open Batch API batches (EVAL_JUDGE_MODE=batch); when one ends, re-runs the "
        "judge steps that wait on it, everything downstream in that checkpoint and the decisions across checkpoints, "
        "in one run.",
        asset_selection=every,
        minimum_interval_seconds=settings.sensor_interval_seconds(minimum_interval_seconds),
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def judge_batch_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        seen = json.loads(context.cursor) if context.cursor else {}
        mark = runs_mark(context.instance)
        if seen == {IDLE: mark}:  # no batch was open at the last look, and only a run opens one
            return dg.SkipReason("no judge batch open")
        wh = Warehouse(warehouse, read_only=True, lock_timeout_s=3)
        try:
            standing = due(wh)
        finally:
            wh.close()
        requests = []
        for (rubric, ckpt), names in sorted(standing.due.items()):
            keys = sorted({k for name in names for k in steps.get(rubric, {}).get(name, [])}, key=str)
            if not keys:
                continue
            requests.append(
                dg.RunRequest(
                    run_key="batch:" + ",".join(sorted(standing.due_ids[(rubric, ckpt)])),
                    partition_key=ckpt,
                    asset_selection=keys,
                    asset_check_keys=[],  # the gates step reports each checkpoint's checks (defs/checks.py)
                    tags={"eval/checkpoint": ckpt, "eval/rubrics": rubric, "eval/purpose": "judge batch ended"},
                )
            )
        events, now = [], {}
        for sub in standing.working:
            text = pending_text(sub)
            now[str(sub["submission_id"])] = text
            if seen.get(str(sub["submission_id"])) != text:
                events.append(
                    dg.AssetObservation(
                        asset_key=dg.AssetKey([str(sub["rubric"]), str(sub["step"])]),
                        partition=str(sub["checkpoint_id"]),
                        metadata={"judge_batch": dg.MetadataValue.text(text)},
                    )
                )
        if not requests and not events:
            why = "; ".join(standing.unreachable) or f"{len(standing.working)} judge batch(es) working, none ended"
            if not (standing.working or standing.unreachable or standing.due):
                context.update_cursor(json.dumps({IDLE: mark}))  # nothing to poll until a run opens a batch
                return dg.SkipReason("no judge batch open")
            return dg.SkipReason(why)
        return dg.SensorResult(run_requests=requests, asset_events=events, cursor=json.dumps(now))

    return judge_batch_sensor
