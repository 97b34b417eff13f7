"""The offline judge: rule-based scores from observable features of a response (judge.heuristic), no model."""

from __future__ import annotations

import json

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.judge_config import JudgeConfig
from eval_pipeline.core.types import Record, Row
from eval_pipeline.judge.backends import BACKENDS
from eval_pipeline.judge.backends.base import JudgedAt, Judging
from eval_pipeline.judge.heuristic import HeuristicJudge
from eval_pipeline.judge.identity import HEURISTIC, JudgeIdentity
from eval_pipeline.judge.rows import questionnaire_rows, reading, score_row


@BACKENDS.register(HEURISTIC)
class HeuristicBackend:
    calls_out = False

    def identity(self, rubric: RubricConfig, config: JudgeConfig, at: JudgedAt | None = None) -> JudgeIdentity:
        panel = rubric.panel
        return JudgeIdentity(
            backend=HEURISTIC,
            models=HEURISTIC,
            endpoint="",
            prompt_version=rubric.judge_version,
            params="{}",
            score_source="chosen",
            panel=json.dumps({"judges": [HEURISTIC], "aggregate": panel.aggregate}),
        )

    def score(self, job: Judging) -> list[Row]:
        rubric, ckpt, records, wh, stats, config, repeat = job.unpacked()
        stats.judges = [HEURISTIC]
        stats.judge_kind = HEURISTIC
        stats.prompts = len(records)
        return _heuristic_rows(rubric, ckpt, records, repeat)


def _heuristic_rows(rubric: RubricConfig, ckpt: str, records: list[Record], repeat: int = 0) -> list[Row]:
    judge = HeuristicJudge(rubric)
    item_ids = {i.id for m in rubric.questionnaire.metrics for i in m.items} if rubric.questionnaire else set()
    rows = []
    for rec in records:
        sample_rows = []
        for key, (chosen, why, dist) in judge.score(rec, repeat).items():
            kind = "questionnaire_item" if key in item_ids else "dimension"
            score, columns = reading(chosen, dist, rubric.panel.score_source)
            row = score_row(
                checkpoint_id=ckpt,
                sample_id=rec["sample_id"],
                judge=judge.name,
                judge_kind=judge.kind,
                model=judge.model,
                dimension=key,
                kind=kind,
                score=score,
                reason=None if score is not None else why,
                rationale=why if score is not None else "",
                rubric_version=rubric.version,
            )
            row.update(columns)
            sample_rows.append(row)
        rows += sample_rows
        rows += questionnaire_rows(rubric, [r for r in sample_rows if r["kind"] == "questionnaire_item"])
    return rows
