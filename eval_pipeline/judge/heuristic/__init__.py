"""The offline heuristic judge: deterministic, rule-based, honest.

It scores only from observable features of the sample (words present, fields
mentioned, numbers matched, phrases used), never poses as an LLM, and is
labelled ``heuristic`` wherever its scores appear. Which features estimate a
dimension is declared in the rubric YAML (``heuristic:`` on each dimension or
questionnaire metric); each feature returns a value in [0, 1] (or None when it
does not apply), the weighted mean of the applicable terms maps linearly onto
the dimension's scale. Text inside the sample cannot change the rules: there is
no instruction channel, only features.

Its uncertainty is declared, not learned: the features place a sample at a
continuous point x on the scale, and the judge states a distribution over the
scale's whole numbers, a normal around x with SD ``SPREAD`` of the scale's
width, discretized and tilted so that its mean is x. Its written score is x
rounded (the most likely value except just short of the scale's ends);
the distribution and its expected value are recorded as an LLM judge's token
probabilities would be, so probability-weighted scores and their agreement work
offline. Asked again (a repeat scoring, ``repeat`` > 0) it behaves as a judge
sampled at a non-zero temperature: its reasoning varies, so the point moves
(x + e, e normal with SD ``DRIFT`` of the width), and it writes a draw from the
distribution around the moved point; both seeded by the sample, the score and
the repeat. The judge_repeatability table then shows what a judge with this much
noise looks like, for the written and for the expected score. These figures
describe the heuristic's declared noise, not an LLM's.
"""

from eval_pipeline.judge.heuristic.judge import (
    DRIFT,
    FEATURES,
    SPREAD,
    Feature,
    HeuristicJudge,
    Scored,
    TextParams,
    distribution,
    draw,
    estimate,
    feature,
    load_features,
    to_scale,
)

__all__ = [
    "DRIFT",
    "FEATURES",
    "SPREAD",
    "Feature",
    "HeuristicJudge",
    "Scored",
    "TextParams",
    "distribution",
    "draw",
    "estimate",
    "feature",
    "load_features",
    "to_scale",
]
