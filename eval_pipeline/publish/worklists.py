"""Worklists for evaluators, written as CSVs to data/worklists/<rubric>/<checkpoint>/.

* pilot.csv: the stratified pilot set (round-robin over the strata the rubric names, seeded);
* spot_check.csv: the seeded 5 % spot-check sample (at least one);
* rereview.csv: samples where two evaluators' scores differ by more than the rubric's max_diff;
* scoring_sheet.csv: a blank sheet in the rubric's template (sample id, context fields, one column per
  dimension, notes).

A cell a spreadsheet would run as a formula (starting with =, +, -, @, tab or carriage return) is
neutralised with a leading apostrophe.
"""

from __future__ import annotations

import csv
import itertools
import math
import random
from pathlib import Path

import pandas as pd

from eval_pipeline.agreement.plan import pilot_set
from eval_pipeline.core import settings
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.derived import per_rater
from eval_pipeline.core.ids import check_checkpoint_id
from eval_pipeline.core.text import neutralise


def write_csv(path: Path, df: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([neutralise(c) for c in df.columns])
        for row in df.itertuples(index=False):
            w.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else neutralise(v) for v in row])


def spot_check(rubric: RubricConfig, samples: pd.DataFrame, seed: int) -> pd.DataFrame:
    ids = sorted(samples[rubric.inputs.id_field])
    k = max(1, math.ceil(len(ids) * rubric.worklists.spot_check_share))
    chosen = sorted(random.Random(seed).sample(ids, min(k, len(ids))))
    return pd.DataFrame({"sample_id": chosen})


def rereview(rubric: RubricConfig, ratings: pd.DataFrame) -> pd.DataFrame:
    spec = rubric.worklists.rereview
    cols = ["sample_id", "evaluator_a", "evaluator_b", "score", "score_a", "score_b", "difference"]
    if spec is None or ratings.empty:
        return pd.DataFrame(columns=cols)
    per = per_rater(rubric, ratings, spec.score, ["sample_id"])
    rows = []
    for e1, e2 in itertools.combinations(list(per.columns), 2):
        pair = per[[e1, e2]].dropna()
        diff = (pair[e1] - pair[e2]).abs().round(9)
        for sid in pair.index[diff > spec.max_diff]:
            rows.append(
                dict(
                    sample_id=sid,
                    evaluator_a=e1,
                    evaluator_b=e2,
                    score=spec.score,
                    score_a=pair.at[sid, e1],
                    score_b=pair.at[sid, e2],
                    difference=diff[sid],
                )
            )
    return pd.DataFrame(rows, columns=cols)


def scoring_sheet(rubric: RubricConfig, samples: pd.DataFrame) -> pd.DataFrame:
    id_col = rubric.inputs.id_field
    sheet = samples[[id_col, *rubric.worklists.sheet_fields]].rename(columns={id_col: "sample_id"}).copy()
    for key in rubric.rating_scales:
        sheet[key] = ""
    sheet["notes"] = ""
    sheet["evaluator"] = ""
    return sheet


def write_worklists(
    rubric: RubricConfig, checkpoint_id: str, samples: pd.DataFrame, ratings: pd.DataFrame, root: Path | None = None
) -> dict[str, int]:
    folder = (root or settings.worklist_dir()) / rubric.name / check_checkpoint_id(checkpoint_id)
    seed = rubric.worklists.seed
    lists = {
        "pilot.csv": pilot_set(rubric, samples, seed),
        "spot_check.csv": spot_check(rubric, samples, seed + 1),
        "rereview.csv": rereview(rubric, ratings),
        "scoring_sheet.csv": scoring_sheet(rubric, samples),
    }
    for name, df in lists.items():
        write_csv(folder / name, df)
    return {name: len(df) for name, df in lists.items()}
