"""The contracts between stages: table names, their columns, and the names rows use.

Every stage that writes or reads one of these tables takes its column list and
its reserved names from here, so a name is spelt once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Final

# --- tables in the main schema, shared by every rubric ---------------------------------------
MAIN = "main"
QUARANTINE = (MAIN, "quarantine")
CHECKPOINTS = (MAIN, "checkpoints")
JUDGE_CACHE = (MAIN, "judge_cache")
BATCH_PENDING = "pending: judge batch"  # how the reason of a judge score waiting on a Batch API batch begins
# the runs of one command (its first evaluation and each re-evaluation `run --wait` launches) carry this tag with
# the command's id, and draw on one judge budget (EVAL_JUDGE_BUDGET) between them
BUDGET_TAG = "eval/budget"
WAITING_ON_BATCH = "waiting on a judge batch"  # how a pending gate's reason says what it waits for is a batch

# --- names rows use ---------------------------------------------------------------------------
PANEL = "panel"  # judge_scores.judge of the panel's aggregate; downstream stages read these rows
ALL_CHECKPOINTS = "ALL"  # agreement.checkpoint_id of the rows over every checkpoint
HUMAN_MEAN = "human_mean"  # the mean of the human raters, as one rater
JUDGE = "judge"  # the judge panel, as one rater
JUDGE_CHOSEN = "judge_chosen"  # the panel's written scores, when its scores are expected values from probabilities
JUDGE_VS_HUMAN_MEAN = f"{JUDGE}~{HUMAN_MEAN}"  # agreement.raters of judge against the human mean
ALL_HUMANS = "all_humans"  # agreement.raters of every human rater together
MODEL_MEAN = "model_mean"  # the mean of the imported model raters, as one rater
ALL_MODELS = "all_models"  # agreement.raters of every model rater together


# The reasons of rating rows that rate no known checkpoint start so: quarantined in every checkpoint's run (never
# lost unseen), they are the ratings folder's problem and do not count against a checkpoint's completeness.
UNPLACED = "unplaced row: "
# ... and of rows no score was written in yet (a ratings template not filled in): kept, reported, not a fault.
UNRATED = "not rated yet: "
# how a failed judge_reliability gate's reason begins when the trust line already says why (the verdict then does
# not say it again): the judge untrusted on the dimension, or drifting on the checkpoint
RELIABILITY_UNTRUSTED, RELIABILITY_DRIFTS = "untrusted", "trusted, but drifts on this checkpoint"
# a quarantined ratings cell whose row's other ratings were kept (the reason ends with it)
BAD_CELL_ONLY = "this cell only: the row's other ratings are kept"


# agreement.between: who an agreement row compares, set where the row is computed (never read back from its raters'
# names): people with people (the baseline a judge is set against), model raters, a mix, or the judge with people
BETWEEN_PEOPLE, BETWEEN_MODELS, BETWEEN_MIXED, BETWEEN_JUDGE = "people", "models", "people and models", "judge"


def between(raters: Iterable[str], people: Collection[str]) -> str:
    """``agreement.between`` of a row comparing ``raters`` (none of them the judge), ``people`` the raters who are
    people: every one a person, none, or a mix."""
    kinds = {r in people for r in raters}
    return BETWEEN_PEOPLE if kinds == {True} else BETWEEN_MODELS if kinds == {False} else BETWEEN_MIXED


def rater_pair(a: str, b: str) -> str:
    """agreement.raters of two raters compared."""
    return f"{a}~{b}"


def rater_vs_others(a: str) -> str:
    """agreement.raters of one rater compared with the rest of its panel (panels past the pairwise limit)."""
    return f"{a}~others"


# --- columns of each table ----------------------------------------------------------------------
RAW_COLUMNS = ["checkpoint_id", "source_file", "line_number", "raw_line", "decode_error"]
QUARANTINE_COLUMNS = [
    "rubric",
    "checkpoint_id",
    "source_file",
    "line_number",
    "stage",
    "reason",
    "raw_line",
    "quarantined_at",
]
RATING_COLUMNS = [
    "checkpoint_id",
    "sample_id",
    "evaluator",
    "rater_kind",
    "dimension",
    "score",
    "source_file",
    "line_number",
    "rated_at",
]
# when a rating arrived (UTC): a ratings file's own ``rated_at`` cell (the annotate app writes it at a row's first
# save; a CSV may carry it); the order a judge's trust is decided and held in (#72). A rating without one has no
# arrival: the moment the pipeline happened to read it is not an input, and would make the verdict depend on the
# path that landed the data
RATED_AT = "rated_at"
RATER_KINDS = ("human", "model")  # ratings.rater_kind: a person, or a model whose published scores were imported
SCORE_COLUMNS = [
    "checkpoint_id",
    "sample_id",
    "judge",
    "judge_kind",
    "model",
    "dimension",
    "kind",
    "score",
    "status",
    "reason",
    "rationale",
    "cached",
    "rubric_version",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "attempts",
    "chosen_score",  # the score the judge wrote
    "expected_score",  # the expected score over the scale from the score token's probabilities, when returned
    "score_distribution",  # that distribution, as JSON {value: probability}
    "score_source",  # which of the two fed `score`: expected (probabilities) or chosen (the written score)
    "prob_on_scale",  # the share of the score token's probability that landed on the scale
    "distribution_note",  # why probabilities were asked for but not used (no distribution, too little on the scale)
]
EXTRACTION_COLUMNS = [
    "checkpoint_id",
    "sample_id",
    "name",
    "extractor",
    "model",
    "observations",
    "items",
    "status",
    "reason",
]
CALIBRATION_COLUMNS = [
    "checkpoint_id",
    "example_id",
    "dimension",
    "stated",
    "judged",
    "diff",
    "within_tolerance",
    "judge",
    "reason",
]
AGREEMENT_COLUMNS = [
    "checkpoint_id",
    "dimension",
    "statistic",
    "raters",
    "n_items",
    "n_raters",
    "value",
    "ci_low",
    "ci_high",
    "prevalence",
    "ceiling_share",
    "label",
    "between",  # people / models / people and models / judge: who the row compares (contracts.between)
]
SUMMARY_COLUMNS = [
    "checkpoint_id",
    "breakdown",
    "group_value",
    "score",
    "headline",
    "n",
    "missing",
    "mean",
    "std",
    "ci_low",
    "ci_high",
    "pass_threshold",
    "pass_rate",
]
COMPARISON_COLUMNS = [
    "checkpoint_id",
    "parent_id",
    "score",
    "n_pairs",
    "parent_mean",
    "mean",
    "delta",
    "ci_low",
    "ci_high",
    "share_better",
    "share_worse",
    "lower_is_better",
    "guarded",
    "regression",
    "judge_noise_95",
    "beyond_judge_noise",
    "p_value",  # paired t-test of the change, two-sided
    "p_holm",  # the p-value corrected for the rubric's scores (Holm)
    "mde",  # the smallest change the shared samples detect (alpha 0.05 two-sided, power 0.8)
    "status",  # compared / not_comparable (the two checkpoints were judged by different judges)
    "note",
]
GATE_COLUMNS = [
    "checkpoint_id",
    "gate",
    "kind",
    "value",
    "threshold",
    "passed",
    "n",
    "reason",
    "rubric_version",
    "status",  # passed / failed / pending (not enough data yet: neither a pass nor a failure of the model)
]
LENGTH_BIAS_COLUMNS = [
    "checkpoint_id",
    "score",
    "n",
    "judge_length_rho",
    "judge_ci_low",
    "judge_ci_high",
    "n_rated",
    "rated_judge_length_rho",
    "human_length_rho",
    "rho_gap",
    "gap_ci_low",
    "gap_ci_high",
    "flagged",
    "mean",
    "slope_per_log_word",
    "mean_log_words",
    "reference_log_words",
    "length_controlled_mean",
]
REPEATABILITY_COLUMNS = [
    "checkpoint_id",
    "dimension",
    "n_samples",
    "times",
    "score_source",  # what the next three measure: 'expected' (read from probabilities), 'chosen' (written), 'mixed'
    "alpha_interval",
    "mean_within_sd",
    "share_changed",
    "alpha_chosen",  # the same three on the score the judge wrote
    "mean_within_sd_chosen",
    "share_changed_chosen",
    "missing",
    "pending",  # scores of the scorings still waiting on a judge batch (not missing: not answered yet)
]


class Table:
    """The tables of a rubric's schema, each written by the asset of the same name (``defs.asset.asset_key``): the one
    place their names are spelled. Plain text, not an enum: the names travel into Dagster's asset keys (which it
    serialises), SQL and frames as they are."""

    RAW_OUTPUTS: Final = "raw_outputs"
    IMPORTED_SCORES: Final = "imported_scores"  # a judge the team already ran, brought with the outputs (#75)
    SAMPLES: Final = "samples"
    EXTRACTIONS: Final = "extractions"
    METRICS: Final = "metrics"
    JUDGE_SCORES: Final = "judge_scores"
    JUDGE_IDENTITY: Final = "judge_identity"
    JUDGE_USAGE: Final = "judge_usage"
    JUDGE_CALIBRATION: Final = "judge_calibration"
    JUDGE_REPEATABILITY: Final = "judge_repeatability"
    SCORES: Final = "scores"
    SUMMARY: Final = "summary"
    COMPARISON: Final = "comparison"
    CALIBRATED_MEANS: Final = "calibrated_means"
    LENGTH_BIAS: Final = "length_bias"
    HUMAN_RATINGS: Final = "human_ratings"
    AGREEMENT: Final = "agreement"
    JUDGE_TRUST: Final = "judge_trust"
    GATES: Final = "gates"
    VERDICT: Final = "verdict"
    RANKS: Final = "ranks"
    WORKLISTS: Final = "worklists"
    CALIBRATION_POOL: Final = "calibration_pool"
    CHECKPOINT_LINEAGE: Final = "checkpoint_lineage"
    JUDGE_ALIGNMENT: Final = "judge_alignment"
    JUDGE_ALIGNMENT_ITEMS: Final = "judge_alignment_items"
