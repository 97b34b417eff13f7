"""The imported judge (``EVAL_JUDGE=imported``): the scores of a judge the team already ran, brought with each
checkpoint (``<checkpoint>/<rubric>.judge.json``, ingest.judged), as this pipeline's judge.

Its identity is who judged as the file says it (model, prompt, date): agreement with people, trust, calibration
and comparisons then treat it as any judge, and never compare its numbers with another judge's. Nothing is asked
over the network. A dimension the file does not score, or scores off the scale, is a missing score with its
reason; a sample it does not score is missing on every dimension; asked again (repeatability) it has no second
answer, so those are missing too.
"""

from __future__ import annotations

import json

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import Row
from eval_pipeline.judge.backends import BACKENDS
from eval_pipeline.judge.backends.base import JudgedAt, Judging
from eval_pipeline.judge.identity import IMPORTED, JudgeIdentity
from eval_pipeline.judge.rows import questionnaire_rows, score_row

NOT_SCORED = "the imported judge did not score this sample"
NONE_BROUGHT = "the checkpoint brought no imported judge scores (<rubric>.judge.json)"


def _rows(rubric: RubricConfig, at: JudgedAt | None, samples: list[str] | None = None) -> pd.DataFrame:
    """The checkpoint's imported cells: of ``samples`` only (a judge step's chunk), or its first row (who judged)."""
    if at is None or not at.wh.table_exists(rubric.name, Table.IMPORTED_SCORES):
        return pd.DataFrame()
    where: dict[str, str | tuple[str, ...]] = {"checkpoint_id": at.checkpoint}
    if samples is not None:
        where["sample_id"] = tuple(samples)
    return at.wh.read(rubric.name, Table.IMPORTED_SCORES, where=where, limit=None if samples is not None else 1)


@BACKENDS.register(IMPORTED)
class ImportedBackend:
    calls_out = False

    def identity(self, rubric: RubricConfig, config: JudgeConfig, at: JudgedAt | None = None) -> JudgeIdentity:
        rows = _rows(rubric, at)
        first = rows.iloc[0] if len(rows) else None
        model = str(first.judge_model) if first is not None else "none"
        return JudgeIdentity(
            backend=IMPORTED,
            models=model,
            endpoint="",
            prompt_version=str(first.judge_prompt) if first is not None else "",
            params=json.dumps({"judged_at": None if first is None else first.judged_at}),
            score_source="imported",
            panel=json.dumps({"judges": [model], "aggregate": rubric.panel.aggregate}),
        )

    def score(self, job: Judging) -> list[Row]:
        rubric, ckpt, records, wh, stats, config, repeat = job.unpacked()
        at = JudgedAt(ckpt, wh)
        found = _rows(rubric, at, [str(r["sample_id"]) for r in records]) if records else pd.DataFrame()
        who = found if len(found) else _rows(rubric, at)  # the chunk's cells, else whether any were brought
        model = str(who.judge_model.iloc[0]) if len(who) else IMPORTED
        cells = {
            (str(r.sample_id), str(r.dimension)): (None if pd.isna(r.score) else float(r.score), r.reason)
            for r in found.itertuples()
        }
        scored = {sid for sid, _ in cells}
        items = {i.id for m in rubric.questionnaire.metrics for i in m.items} if rubric.questionnaire else set()
        keys = [d.key for d in rubric.judged_dimensions] + sorted(items)
        stats.judges, stats.judge_kind, stats.prompts = [model], IMPORTED, len(records)
        out: list[Row] = []
        for rec in records:
            sid = str(rec["sample_id"])
            sample_rows = []
            for key in keys:
                score, reason = cells.get((sid, key), (None, None))
                if repeat:
                    score, reason = None, "an imported judge cannot be asked again (no repeated answer)"
                elif sid not in scored:
                    reason = NOT_SCORED if len(who) else NONE_BROUGHT
                sample_rows.append(
                    score_row(
                        checkpoint_id=ckpt,
                        sample_id=sid,
                        judge=model,
                        judge_kind=IMPORTED,
                        model=model,
                        dimension=key,
                        kind="questionnaire_item" if key in items else "dimension",
                        score=score,
                        reason=None if score is not None else str(reason or "the imported judge gave no score"),
                        rubric_version=rubric.version,
                    )
                )
            out += sample_rows
            out += questionnaire_rows(rubric, [r for r in sample_rows if r["kind"] == "questionnaire_item"])
        return out
