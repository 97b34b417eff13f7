"""A process that judges one rubric's sample checkpoint in batch mode (judge.batch) and says how it stands, for
the tests that SIGKILL it part-way (tests/judge/test_batch.py):

    python -m tests.helpers.batch_judge <warehouse> <rubric> <samples>

prints one JSON line: {"ok": n, "pending": n, "missing": n}, samples of the first ``samples`` lines by how their
panel scores stand (all scored; any waiting on a batch; any missing).
OPENAI_BASE_URL and OPENAI_API_KEY name the endpoint, as for any run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd

from eval_pipeline.core import settings
from eval_pipeline.core.contracts import PANEL
from eval_pipeline.judge import batch, costs
from eval_pipeline.judge.runner import judge_samples
from eval_pipeline.rubrics import load_rubrics
from eval_pipeline.storage.warehouse import Warehouse

# the project's folders, named here rather than imported from tests.conftest: this process is started ~30 times a
# suite, and the conftest's imports (pytest, dagster) were ~1 CPU-s of each start
ROOT = Path(__file__).resolve().parents[2]
RUBRIC_DIR, SAMPLE_CHECKPOINTS = ROOT / "rubric_configs", ROOT / "data" / "checkpoints"


def main() -> None:
    where, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rubric = next(r for r in load_rubrics(RUBRIC_DIR) if r.name == name)
    lines = (SAMPLE_CHECKPOINTS / "ckpt-0100" / f"{name}.jsonl").read_text().splitlines()
    records = []
    fields = [f.name for f in rubric.inputs.fields if f.required]
    for line in lines:  # the sample file holds lines the validation rejects: the first ``n`` good ones
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and all(isinstance(row.get(f), str) and row[f].strip() for f in fields):
            records.append({**row, "sample_id": str(row[rubric.inputs.id_field])})
        if len(records) == n:
            break
    config = settings.judge_config().with_(mode="openai", call_mode="batch")
    wh = Warehouse(where)
    spending = costs.spending(f"batch-judge-{os.getpid()}", config.budget, config.prices)
    with spending, batch.for_step("ckpt-0100", "judge_scores"):
        df, _ = judge_samples(rubric, "ckpt-0100", records, wh, config)
    panel = df[df.judge == PANEL].assign(waiting=lambda d: d.reason.fillna("").str.contains(batch.PENDING, regex=False))
    panel["lost"] = (panel.status == "missing") & ~panel.waiting
    by = panel.groupby("sample_id")
    waiting, lost = by.waiting.any(), by.lost.any()
    reasons = sorted(set(panel.reason[panel.lost].astype(str)))[:3]
    got = {"ok": int((~waiting & ~lost).sum()), "pending": int(waiting.sum()), "missing": int(lost.sum())}
    print(json.dumps({**got, "reasons": reasons}))
    assert isinstance(df, pd.DataFrame)


if __name__ == "__main__":
    main()
