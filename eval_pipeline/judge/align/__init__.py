"""Aligning a judge to people's ratings, with the ratings that decide it kept apart from the ratings it was tuned on.

Contract (``align``):

- **Items.** Every rated sample of the calibration pool, each with the people's mean per rated dimension (their
  notes kept for few-shot examples). A share (``AlignSpec.holdout_share``) is held out, stratified by the people's
  score on the first target dimension and seeded; a sample an earlier alignment tuned on is never held out. The
  rest (the tuning share) is split into ``folds`` folds, stratified the same way.
- **Candidates.** Configurations of the judge reached from the current one along the axes its backend offers
  (``AXES``: one module per backend, registered under the backend's name): instruction variants the rubric allows,
  few-shot examples, score source and temperature for a model; feature weights for the offline judge. The search
  is a coordinate ascent from the current judge: along each axis in turn, each value with the others held at the
  best so far, the best kept when it improves; it stops at ``max_candidates``, after ``patience`` candidates in a
  row without improvement, or before a candidate would pass the call or money budget (the held-out judging is
  reserved first).
- **Cross-validated agreement.** A candidate's judge scores every tuning item once, from a prompt whose few-shot
  examples (if any) come from the other folds only; its agreement is quadratic kappa (both scores rounded half up
  to the scale, as the agreement table) and Spearman over those out-of-fold scores, averaged over the target
  dimensions, with a seeded percentile bootstrap interval over tuning items.
- **Held out.** The best candidate (few-shot examples drawn from the whole tuning share) and the current judge
  score the held-out items; their difference in quadratic kappa gets a paired bootstrap interval (both computed on
  the same resamples). It is recommended only when it is not the current judge and the interval's lower end is
  above ``min_gain``: tuning noise across many candidates is not an improvement.
- Every judging goes through the judge backend as a checkpoint's judging does (``judge.runner.judge_samples``):
  the cache, the client's bounds and the budget apply, and a repeat of an alignment costs nothing.

The result (``Alignment``) holds every candidate, the items' roles and the overlay an adoption writes
(core.config.alignment): the chosen changes and the ``aligned`` record, whose ``tuned_on`` lists every sample the
aligned judge was tuned on or shown, never part of its calibration set.
"""

from eval_pipeline.judge.align.search import (
    HELD_OUT,
    SHOWN,
    TUNE,
    AlignError,
    Alignment,
    Item,
    align,
    frames,
    rated_items,
)
from eval_pipeline.judge.align.space import AXES, Axis, load_axes

__all__ = ["AXES", "HELD_OUT", "SHOWN", "TUNE", "AlignError", "Alignment", "Axis", "Item", "align", "frames"]
__all__ += ["load_axes", "rated_items"]
