"""Two checkpoints of a rubric compared from the warehouse: the rows ``comparison.compare`` tests (paired over the
samples both scored, Holm, practical margins), with the human-calibrated changes where people rated both and the
dimensions the judge is not trusted on, or not comparable when different judges judged them. Read by the comparison
asset (each checkpoint against its parent), `eval-pipeline compare` and the viewer's compare page (any two)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from eval_pipeline.agreement.compute import judge_on_human_scale, rater_sets
from eval_pipeline.agreement.trust import PENDING, UNTRUSTED, judge_bar
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import PANEL, Table
from eval_pipeline.core.types import Row
from eval_pipeline.scoring.comparison import calibrated_rows, compare, empty_comparison, not_comparable
from eval_pipeline.storage.tables import Filter
from eval_pipeline.storage.warehouse import Reader


def rows_of(
    wh: Reader,
    rubric: RubricConfig,
    table: str,
    checkpoint_id: str,
    columns: Sequence[str] = (),
    equal: dict[str, Filter] | None = None,
) -> pd.DataFrame | None:
    """One checkpoint's rows of ``<rubric>.<table>`` (its ``columns``; default all; those matching ``equal``);
    None when the table does not exist yet."""
    if not wh.table_exists(rubric.name, table):
        return None
    return wh.read(rubric.name, table, columns=columns, where={"checkpoint_id": checkpoint_id, **(equal or {})})


def recorded_judge(wh: Reader, rubric: RubricConfig, checkpoint_id: str) -> tuple[str, str] | None:
    """(identity, label) of the judge that scored this checkpoint (``<rubric>.judge_identity``); None when none
    was recorded (not judged yet, or judged by a version that did not record it)."""
    rows = rows_of(wh, rubric, Table.JUDGE_IDENTITY, checkpoint_id, columns=("judge_identity", "label"))
    if rows is None or rows.empty:
        return None
    return str(rows.judge_identity.iloc[0]), str(rows.label.iloc[0])


def panel_on_human_scale(wh: Reader, rubric: RubricConfig, checkpoint_ids: Sequence[str]) -> pd.DataFrame:
    """The panel's judge_scores of these checkpoints on the scale people rate (checkpoint_id, sample_id,
    dimension, score): what the human-calibrated estimates read beside the ratings."""
    judge = wh.read(
        rubric.name,
        Table.JUDGE_SCORES,
        columns=("checkpoint_id", "sample_id", "dimension", "kind", "judge", "score"),
        where={"checkpoint_id": tuple(checkpoint_ids), "judge": PANEL},
    )
    return judge_on_human_scale(rubric, judge)


def not_trusted(verdict: str, n_rated: int, floor: int) -> bool:
    """A dimension whose judged change is no evidence: its judge untrusted, or still pending past the rubric's
    floor of rated samples (people's ratings had their chance to show it trustworthy and have not yet)."""
    return verdict == UNTRUSTED or (verdict == PENDING and n_rated >= floor)


def judges_of(
    wh: Reader, rubric: RubricConfig, ckpt_id: str, parent: str
) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
    """((identity, label) of the parent's judge, the same of this checkpoint's), or None for a rubric without a
    judge."""
    if not (rubric.judged_dimensions or rubric.questionnaire):
        return None
    unknown = ("", "a judge this version did not record")
    return recorded_judge(wh, rubric, parent) or unknown, recorded_judge(wh, rubric, ckpt_id) or unknown


def calibrated_changes(wh: Reader, rubric: RubricConfig, ckpt_id: str, parent: str) -> list[Row]:
    """The human-calibrated changes of the judged dimensions (comparison.calibrated_rows) from the panel's scores
    and the people's ratings of both checkpoints."""
    ids = [ckpt_id, parent]
    if not wh.table_exists(rubric.name, Table.HUMAN_RATINGS):
        return []
    humans = wh.read(rubric.name, Table.HUMAN_RATINGS, where={"checkpoint_id": tuple(ids)})
    humans = humans[humans.score.notna()]
    if humans.empty:
        return []
    judge = panel_on_human_scale(wh, rubric, ids)
    return calibrated_rows(rubric, ckpt_id, parent, judge, rater_sets(rubric, humans)["human"])


def untrusted_dimensions(wh: Reader, rubric: RubricConfig, ckpt_id: str) -> set[str]:
    """The dimensions this checkpoint's judge is not trusted on (its judge_trust rows): untrusted, or still pending
    past the rubric's floor of rated samples (people's ratings had their chance to show it trustworthy and have
    not yet). Below the floor a judged change still counts, as it does where no one rated at all."""
    rows = wh.read(
        rubric.name, Table.JUDGE_TRUST, columns=("dimension", "verdict", "n_rated"), where={"checkpoint_id": ckpt_id}
    )
    floor = judge_bar(rubric).min_samples
    return {str(r.dimension) for r in rows.itertuples() if not_trusted(str(r.verdict), int(r.n_rated), floor)}


def compared(reader: Reader, rubric: RubricConfig, ckpt_id: str, parent: str | None) -> tuple[pd.DataFrame, str]:
    """One checkpoint against its parent (or any earlier checkpoint: `eval-pipeline compare`): the comparison rows
    (scoring.comparison.compare: paired test, Holm, practical margins, the human-calibrated changes) and a note
    saying how; not comparable when another judge judged the other one."""
    judged = bool(rubric.judged_dimensions or rubric.questionnaire)
    repeats = bool(rubric.repeat and judged)
    child = reader.read(rubric.name, Table.SCORES, where={"checkpoint_id": ckpt_id})
    prev = rows_of(reader, rubric, Table.SCORES, parent) if parent else None
    judges = judges_of(reader, rubric, ckpt_id, parent) if parent else None
    if parent is None or prev is None or prev.empty:
        note = "no parent checkpoint" if parent is None else f"parent {parent} has no scores yet: evaluate it first"
        return empty_comparison(), note
    if judges is not None and judges[0] != judges[1]:
        note = (
            f"not comparable: parent {parent} judged by {judges[0][1]}, this checkpoint by {judges[1][1]}; "
            f"re-judge the parent with the current judge: eval-pipeline run --checkpoint {parent} "
            f"--rubric {rubric.name}"
        )
        return not_comparable(rubric, ckpt_id, parent, note), note
    noise = rows_of(reader, rubric, Table.JUDGE_REPEATABILITY, ckpt_id) if repeats else None
    sd = dict(zip(noise.dimension, noise.mean_within_sd)) if noise is not None and len(noise) else None
    calibrated = calibrated_changes(reader, rubric, ckpt_id, parent) if judged else None
    df = compare(rubric, ckpt_id, parent, child, prev, sd, calibrated, untrusted_dimensions(reader, rubric, ckpt_id))
    return df, f"compared with {parent}"
