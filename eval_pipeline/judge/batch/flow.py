"""The Batch API flow of a judge step: its contract is the package's docstring (judge.batch)."""

from __future__ import annotations

import contextlib
import contextvars
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import eval_pipeline.judge.batch.records as records
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import BATCH_PENDING
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import JSONObject, Row
from eval_pipeline.judge import cache, costs
from eval_pipeline.judge.batch.lines import absorbed, json_object, missed, result_of
from eval_pipeline.judge.batch.provider import ENDPOINT, FileBound, Provider
from eval_pipeline.judge.batch.records import (
    ANSWERED,
    COLLECTED,
    ENDED,
    FAILED,
    LOST,
    PREPARING,
    REASK,
    SUBMITTED,
    UPLOADED,
    WORKING,
)
from eval_pipeline.judge.client import CallOutcome, CallResult, CallSpec, ClientStats, OnAnswer, more_room, request_body
from eval_pipeline.judge.client import settle as settle_answer
from eval_pipeline.judge.redact import redact
from eval_pipeline.storage.warehouse import Warehouse

PENDING = BATCH_PENDING  # how the reason of a score waiting on a batch begins (scoring.verdict reads it)
MAX_LINES = 50_000  # requests in one batch (OpenAI's limit; the providers that copy the API have the same or more)
MAX_FILE_BYTES = 190 * 1024 * 1024  # an input file's size, under OpenAI's 200 MB


@dataclass(frozen=True)
class Step:
    """The judge step a batch answers: the Dagster asset (its table) and partition the batch sensor re-runs."""

    checkpoint_id: str = ""
    step: str = ""


_STEP: contextvars.ContextVar[Step | None] = contextvars.ContextVar("judge_batch_step", default=None)


@contextlib.contextmanager
def for_step(checkpoint_id: str, step: str) -> Iterator[None]:
    """Within: the batches submitted answer ``step`` (a judge step's table) of ``checkpoint_id``."""
    token = _STEP.set(Step(checkpoint_id, step))
    try:
        yield
    finally:
        _STEP.reset(token)


def pending_text(sub: Row) -> str:
    """``pending: judge batch <id> <state> (<n> of <N> done)``, the reason of each of its prompts' scores."""
    state = "in progress" if sub["state"] in (*WORKING, PREPARING, UPLOADED) else str(sub["state"])
    done = int(sub.get("completed") or 0) + int(sub.get("failed") or 0)
    return f"{PENDING} {sub.get('batch_id') or sub['submission_id']} {state} ({done} of {int(sub['requests'])} done)"


def answer(
    rubric: RubricConfig,
    settings: JudgeConfig,
    specs: list[CallSpec],
    wh: Warehouse,
    on_answer: OnAnswer,
    persist: Callable[[], None],
) -> tuple[dict[str, CallOutcome], ClientStats]:
    """Each spec's outcome (final, or ``pending`` with the batch it waits on), and the statistics (``calls``: lines
    read; ``http_attempts``: every request to the provider). ``on_answer`` sees every final outcome; ``persist``
    makes what it was given durable (the cache), and is called before a submission is marked collected."""
    by_key = {s.key: s for s in specs}
    flow = _Flow(rubric, settings, wh, by_key, on_answer, persist)
    with Provider(settings.base_url, settings.timeout_s) as flow.provider:
        flow.run()
    flow.stats.http_attempts += flow.provider.requests
    return flow.outcomes, flow.stats


class _Flow:
    """One ``answer``: the records of its prompts read once, each submission advanced, collected or made."""

    provider: Provider

    def __init__(
        self,
        rubric: RubricConfig,
        settings: JudgeConfig,
        wh: Warehouse,
        by_key: dict[str, CallSpec],
        on_answer: OnAnswer,
        persist: Callable[[], None],
    ):
        self.rubric, self.settings, self.wh, self.by_key = rubric, settings, wh, by_key
        self.on_answer, self.persist = on_answer, persist
        self.outcomes: dict[str, CallOutcome] = {}
        self.stats = ClientStats()
        self.step = _STEP.get() or Step()
        self.reask: dict[str, Row] = {}  # key -> its line, to be asked a second time

    def run(self) -> None:
        known = records.latest_lines(self.wh, list(self.by_key))
        fresh = [k for k in self.by_key if k not in known]
        mine: dict[str, dict[str, Row]] = {}
        for key, line in known.items():
            mine.setdefault(str(line["submission_id"]), {})[key] = line
        for sub in records.submissions(self.wh, mine):
            lines = mine[sub["submission_id"]]
            waiting = {k: ln for k, ln in lines.items() if ln["state"] == SUBMITTED and sub["state"] != COLLECTED}
            fresh += self._settled({k: ln for k, ln in lines.items() if k not in waiting})
            if not waiting:
                continue
            sub = self._advance(sub)  # resumed: looked for at the provider, how it stands asked
            if sub["state"] in (*ENDED, LOST):
                self._collect(sub, waiting)
            else:
                for key in waiting:
                    self.outcomes[key] = CallOutcome(error=pending_text(sub), pending=True)
        self._close_answered(set(mine))
        if fresh:
            self._submit(fresh, 1)
        if self.reask and self.settings.batch_retry == "online":
            self._online(list(self.reask))
        elif self.reask:
            self._submit(list(self.reask), 2)

    def _settled(self, lines: dict[str, Row]) -> list[str]:
        """Prompts whose line is settled: failed for good (missing with the reason), to be asked again (a process
        killed before it asked), or answered but no longer in the cache (asked anew: returned)."""
        fresh = []
        for key, line in lines.items():
            if line["state"] == FAILED:
                self._final(key, CallOutcome(error=str(line["reason"] or "judge batch: no answer"), attempts=1))
            elif line["state"] == REASK:
                self.reask[key] = line
            else:
                fresh.append(key)
        return fresh

    def _close_answered(self, seen: set[str]) -> None:
        """Submissions of this step that ended and whose every prompt still waiting is in the cache already (a process
        killed after writing the cache, before marking them): marked collected, so nothing waits on them."""
        step = {"rubric": self.rubric.name, "checkpoint_id": self.step.checkpoint_id, "step": self.step.step}
        for sub in records.submissions(self.wh, states=ENDED, of={**step, "judge": self.settings.name}):
            if sub["submission_id"] in seen:
                continue
            lines = records.lines_of(self.wh, str(sub["submission_id"]))
            waiting = [str(ln["custom_id"]) for ln in lines if ln["state"] == SUBMITTED]
            if len(cache.lookup(self.wh, waiting)) < len(set(waiting)):
                continue  # another call of the step reads them
            done = [{**ln, "state": ANSWERED} if ln["state"] == SUBMITTED else ln for ln in lines]
            records.record(self.wh, {**sub, "state": COLLECTED, "reason": "answers found in the judge cache"}, done)

    # ---- a submission's life -------------------------------------------------------------------------------------

    def _line(self, key: str, max_tokens: int) -> tuple[str, JSONObject]:
        """The input line asking ``key``'s prompt with ``max_tokens`` (ASCII JSON: its length is its size), and the
        request body it carries."""
        spec = self.by_key[key]
        body = request_body(self.settings, spec.messages, spec.schema, max_tokens)
        return json.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT, "body": body}), body

    def _advance(self, sub: Row, data: bytes | None = None) -> Row:
        """The submission one step further: uploaded, created, or how the provider says it stands. ``data``: the
        input file of a submission just recorded; without it the submission is being resumed, and what an earlier
        process may have sent without recording it is looked for at the provider first (its input file then
        rebuilt from the prompts). A provider answer that is not usable (provider.Unusable) ends the submission
        as failed with the reason: its prompts are asked again, then missing."""
        from eval_pipeline.judge.batch.provider import Unusable

        try:
            return self._step(sub, data)
        except Unusable as exc:
            sub = {**sub, "state": "failed", "output_file_id": None, "error_file_id": None, "reason": str(exc)}
            records.update(self.wh, sub)
            return sub

    def _step(self, sub: Row, data: bytes | None) -> Row:
        p, sid, resuming = self.provider, str(sub["submission_id"]), data is None
        if sub["state"] == PREPARING:
            found = p.find_file(str(sub["input_file"])) if resuming else None
            if found is None and data is None:
                lines = [ln for ln in records.lines_of(self.wh, sid) if str(ln["custom_id"]) in self.by_key]
                data = "".join(
                    self._line(str(ln["custom_id"]), int(ln["max_tokens"]))[0] + "\n" for ln in lines
                ).encode()
            sub = {**sub, "input_file_id": found or p.upload(str(sub["input_file"]), data or b"")}
            sub["state"] = UPLOADED
            records.update(self.wh, sub)
        if sub["state"] == UPLOADED:
            batch = p.find_batch(sid, str(sub["input_file_id"])) if resuming else None
            batch = batch or p.create(str(sub["input_file_id"]), self.settings.batch_window, sid)
            sub = absorbed(sub, batch)
            records.update(self.wh, sub)
        elif resuming and sub["state"] not in (COLLECTED, LOST):
            batch_id = str(sub["batch_id"])
            batch = p.retrieve(batch_id) or p.find_batch(sid, sub.get("input_file_id"), batch_id)
            again = {**sub, "unseen": 0, "reason": None if sub.get("unseen") else sub.get("reason")}  # found again
            new = absorbed(again, batch) if batch else missed(sub)
            if new != sub:
                records.update(self.wh, new)
            sub = new
        return sub

    def _submit(self, keys: list[str], round_: int) -> None:
        """``keys`` sent in new batches (``round_`` 2: asked a second time, a cut-off answer with more room), each
        line built once, a batch at most ``MAX_LINES`` lines and ``MAX_FILE_BYTES``."""
        budget = costs.current()
        lines: list[Row] = []
        texts: list[str] = []
        size, reserved = 0, 0.0
        for key in keys:
            cut_at = int((self.reask.get(key) or {}).get("cut_at") or 0)
            room = (more_room(cut_at) or self.settings.max_tokens) if cut_at else self.settings.max_tokens
            text, body = self._line(key, room)
            held = 0.0
            if budget is not None:
                got = budget.reserve(self.settings.model, body["messages"], body.get("response_format"), room, True)
                if got is None:
                    self._final(key, CallOutcome(error=budget.why_not(), not_asked=True))
                    continue
                budget.settle(got, self.settings.model, None, billed=True)  # held whole until its results settle it
                held = got
            if lines and (len(lines) >= MAX_LINES or size + len(text) + 1 > MAX_FILE_BYTES):
                self._send(lines, texts, round_, reserved)
                lines, texts, size, reserved = [], [], 0, 0.0
            lines.append({"custom_id": key, "round": round_, "state": SUBMITTED, "max_tokens": room, "cut_at": 0})
            texts.append(text)
            size += len(text) + 1
            reserved += held
        if lines:
            self._send(lines, texts, round_, reserved)

    def _send(self, lines: list[Row], texts: list[str], round_: int, reserved: float) -> None:
        """One submission of ``lines`` (their input lines ``texts``): recorded, then uploaded and created."""
        sid = uuid.uuid4().hex
        sub: Row = {
            "submission_id": sid,
            "state": PREPARING,
            "rubric": self.rubric.name,
            "checkpoint_id": self.step.checkpoint_id,
            "step": self.step.step,
            "judge": self.settings.name,
            "model": self.settings.model,
            "base_url": redact(self.settings.base_url or "", self.provider.key or None),
            "round": round_,
            "input_file": f"eval-pipeline-{sid}.jsonl",
            "requests": len(lines),
            "completed": 0,
            "failed": 0,
            "window": self.settings.batch_window,
            "reserved_cost": reserved if costs.current() is not None else None,
            "currency": costs.load_prices(self.settings.prices).currency,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "created_at": records.now(),
        }
        for line in lines:
            line["submission_id"] = sid
        records.record(self.wh, sub, lines)  # before anything is sent: a process killed now finds it
        sub = self._advance(sub, data="".join(t + "\n" for t in texts).encode())
        for line in lines:
            self.outcomes[str(line["custom_id"])] = CallOutcome(error=pending_text(sub), pending=True)

    # ---- results -------------------------------------------------------------------------------------------------

    def _collect(self, sub: Row, lines: dict[str, Row]) -> None:
        """An ended submission's results for this call's prompts (``lines``) read into outcomes; what it did not
        answer asked again or failed. Its other prompts (another call of the step, e.g. a repeat's subset) keep
        waiting for their own call; the submission is collected once none waits."""
        import openai

        seen: dict[str, Row] = {}
        prices = costs.load_prices(self.settings.prices)
        used, read = [0, 0], 0
        cuts = []
        got: dict[str, CallResult] = {}
        twice: set[str] = set()
        for file_id in (sub.get("output_file_id"), sub.get("error_file_id")):
            if not file_id or not lines:
                continue
            bound = FileBound.asked(max(len(lines), int(sub.get("requests") or 0)))  # the file answers them all
            try:
                for raw in self.provider.lines(str(file_id), bound=bound):
                    item = json_object(raw)
                    key = str(item.get("custom_id") or "")
                    if key not in lines:
                        continue
                    res = result_of(item, self.provider.key or None)
                    read += 1
                    used[0] += res.prompt_tokens
                    used[1] += res.completion_tokens
                    if key in got and (got[key].text, got[key].error) != (res.text, res.error):
                        twice.add(key)  # two different answers to one prompt: neither is taken
                    got.setdefault(key, res)
            except openai.NotFoundError:  # the provider no longer has the file: what it held is asked again
                bound.cut = (
                    f"the provider no longer has the result file {redact(str(file_id), self.provider.key or None)}"
                )
            cuts += [bound.cut] if bound.cut else []
        for key, res in got.items():
            if key in twice:
                seen[key] = self._unanswered(
                    key,
                    lines[key],
                    "the batch's result files answered this prompt twice, differently: neither answer is taken",
                )
            else:
                seen[key] = self._read(key, lines[key], res)
        why = f"judge batch {sub.get('batch_id') or sub['submission_id']} {sub['state']}: no answer to this prompt"
        if sub.get("reason") or cuts:
            why += f" ({'; '.join([*([sub['reason']] if sub.get('reason') else []), *cuts])})"
        for key, line in lines.items():
            if key not in seen:
                seen[key] = self._unanswered(key, line, why)
        self.stats.calls += read
        self.stats.prompt_tokens += used[0]
        self.stats.completion_tokens += used[1]
        self.stats.batch_prompt_tokens += used[0]
        self.stats.batch_completion_tokens += used[1]
        self.persist()  # the answers in the cache before the submission says they were read
        every = [{**ln, **seen.get(str(ln["custom_id"]), {})} for ln in records.lines_of(self.wh, sub["submission_id"])]
        tokens = int(sub.get("prompt_tokens") or 0) + used[0], int(sub.get("completion_tokens") or 0) + used[1]
        done = {
            **sub,
            "state": sub["state"] if any(ln["state"] == SUBMITTED for ln in every) else COLLECTED,
            "prompt_tokens": tokens[0],
            "completion_tokens": tokens[1],
            "cost": prices.cost(self.settings.model, *tokens, batch=True),
            "online_cost": prices.cost(self.settings.model, *tokens),
        }
        records.record(self.wh, done, every)

    def _read(self, key: str, line: Row, res: CallResult) -> Row:
        """One result line read; the line's new state."""
        out = CallOutcome()
        if res.error is None and settle_answer(self.by_key[key], out, res, int(line["max_tokens"])):
            self._final(key, out)
            return {**line, "state": ANSWERED, "reason": out.error}
        reason = res.error or out.error or "no usable answer"
        if int(line["round"]) < 2:
            self.reask[key] = {**line, "cut_at": out.cut_at, "reason": reason}
            return {**line, "state": REASK, "cut_at": out.cut_at, "reason": reason}
        out.error = out.error or reason
        self._final(key, out)  # the judge's last answer (cached unusable), or the failure (not cached)
        return {**line, "state": ANSWERED if out.answer_text is not None else FAILED, "reason": out.error}

    def _unanswered(self, key: str, line: Row, why: str) -> Row:
        if int(line["round"]) < 2:
            self.reask[key] = {**line, "reason": why}
            return {**line, "state": REASK, "reason": why}
        self._final(key, CallOutcome(error=why, attempts=1))
        return {**line, "state": FAILED, "reason": why}

    def _final(self, key: str, out: CallOutcome) -> None:
        self.outcomes[key] = out
        self.on_answer(key, out)

    def _online(self, keys: list[str]) -> None:
        """The prompts to ask a second time, asked online (EVAL_JUDGE_BATCH_RETRY=online); their batch lines say
        how that went."""
        from eval_pipeline.judge.calls import call_specs

        got, stats = call_specs(self.settings, [self.by_key[k] for k in keys], self.on_answer)
        self.outcomes.update(got)
        self.stats.add(stats)
        by_sub: dict[str, dict[str, Row]] = {}
        for key in keys:
            o = got[key]
            state = FAILED if o.answer_text is None and o.error else ANSWERED
            by_sub.setdefault(str(self.reask[key]["submission_id"]), {})[key] = {"state": state, "reason": o.error}
        for sub in records.submissions(self.wh, by_sub):
            changed = by_sub[sub["submission_id"]]
            rows = records.lines_of(self.wh, sub["submission_id"])
            records.record(self.wh, sub, [{**r, **changed.get(str(r["custom_id"]), {})} for r in rows])
