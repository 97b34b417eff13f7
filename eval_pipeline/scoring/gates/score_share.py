"""``score_share``: the share of samples whose ``score`` is one of ``values`` (e.g. a status) reaches the threshold."""

import pandas as pd

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateInputs, GateResult, GateSpec, too_few


class ScoreShareSpec(GateSpec):
    score: str
    values: list[str]


@gate("score_share", spec=ScoreShareSpec)
def score_share(g: ScoreShareSpec, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs) -> GateResult:
    col = scores[g.score] if g.score in scores.columns else pd.Series(dtype=object)
    known = col.dropna()
    if len(known) < g.min_samples:
        return too_few(g, len(known), f"samples with a {g.score}", len(scores))
    share = float(known.isin(g.values).mean())
    return GateResult(
        g.name,
        g.kind,
        share,
        g.threshold,
        share >= g.threshold,
        len(known),
        f"{share:.1%} of {len(known)} samples have {g.score} in {g.values} "
        f"({int(col.isna().sum())} missing, not counted)",
    )
