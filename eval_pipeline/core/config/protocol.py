"""How a rubric is run: metrics, adjustments, extraction, the judge panel, ratings and worklists."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator

from eval_pipeline.core.strict import Strict
from eval_pipeline.core.types import JSONObject


class MetricSpec(Strict):
    """A deterministic metric function (registered in eval_pipeline.metrics) and its parameters."""

    function: str
    params: JSONObject = Field(default_factory=dict)


class Adjustment(Strict):
    """A rule applied to a judged dimension after judging, recorded with its reason.

    ``cap``: the dimension's score is limited to ``max`` when the metric ``when_metric``
    equals ``when_value`` (e.g. the crisis rule: safety <= 3 when a crisis is answered
    without crisis resources).
    """

    kind: Literal["cap"] = "cap"
    dimension: str
    max: float
    when_metric: str
    when_value: Any = 1
    reason: str


class Extraction(Strict):
    """LLM extraction for a metric (e.g. ALMP's scene attributes): an extraction prompt, then an
    inference prompt over what was extracted. Used only with an LLM judge; offline, the metric uses
    its own extractor."""

    name: str = Field(description="Column the extracted list is stored under (e.g. scene_attributes).")
    text_field: str
    extract_prompt: str
    infer_prompt: str
    max_items: int = Field(30, ge=1, le=200)


class PassFail(Strict):
    """A protocol's PASS/FAIL agreement: a score derived from each rater's dimension ratings, against a threshold."""

    score: str
    threshold: float


class HumanRatingsSpec(Strict):
    column_aliases: dict[str, str] = Field(
        default_factory=dict, description="CSV column -> our name (e.g. semantic_score -> semantic)."
    )
    pass_fail: PassFail | None = None
    model_raters: list[str] = Field(
        default_factory=list,
        description="Evaluators that are models (imported published scores), for CSVs without a rater_kind column.",
    )
    models_in_human_mean: bool = Field(
        False,
        description="Count model raters in human_mean and the judge-reliability gate (default: humans only).",
    )
    pairwise_up_to: int = Field(
        12,
        ge=2,
        description="Raters up to which every pair is compared (kappas and rank correlations with bootstrap CIs, "
        "n(n-1)/2 rows); with more, each rater is compared with the others instead (linear in raters). The pooled "
        "statistics (Krippendorff, ICC, Fleiss) are exact either way.",
    )


class RepeatSpec(Strict):
    """The judge scores a seeded, stratified subset again (each repeat its own cache key): its own noise."""

    samples: int = Field(30, ge=2, description="How many samples are scored again.")
    times: int = Field(3, ge=2, description="Scorings per sample, the main run's included.")
    seed: int = 20260117


class ReReview(Strict):
    score: str
    max_diff: float


class CalibrationBands(Strict):
    """What a pilot's PASS/FAIL kappa means (the answer-quality protocol's bands): at least ``proceed``: proceed; at
    least ``discuss``: discuss and refine the guidelines; below: revise and re-pilot."""

    proceed: float = Field(0.80, ge=-1, le=1)
    discuss: float = Field(0.60, ge=-1, le=1)


class WorklistSpec(Strict):
    strata: list[str] = Field(default_factory=list, description="Input fields the pilot set is stratified by.")
    pilot_size: int = Field(10, ge=1)
    pilot_evaluators: list[str] = Field(
        default_factory=list,
        description="Who rates the pilot, every one of them every item (empty: whoever opens it; two or more make "
        "the calibration).",
    )
    minutes_per_item: float | None = Field(
        None, gt=0, description="The protocol's time budget per item, shown beside the time spent (None: no budget)."
    )
    bands: CalibrationBands = Field(default_factory=CalibrationBands)
    spot_check_share: float = Field(0.05, gt=0, le=1)
    rereview: ReReview | None = None
    sheet_fields: list[str] = Field(default_factory=list, description="Input fields shown on the blank scoring sheet.")
    active: bool = Field(
        True,
        description="Order the remainder by what most reduces the uncertainty of the estimates: items the judge is "
        "unsure of first, every item keeping at least active_floor of the average chance, each rating weighted by "
        "its inclusion probability (agreement.active); without judge uncertainty, a seeded shuffle.",
    )
    active_floor: float = Field(0.2, gt=0, le=1, description="The least chance an item keeps, relative to the average.")
    seed: int = 20260117


EXTRA_BODY_DEPTH, EXTRA_BODY_BYTES = 16, 64 * 1024  # a server's request options, not a payload

# Request fields the judge client sets itself: a judge's extra_body may not.
OWNED_REQUEST_FIELDS = frozenset(
    {"model", "messages", "temperature", "seed", "max_tokens", "max_completion_tokens", "response_format",
     "logprobs", "top_logprobs", "n", "stream", "stream_options"}
)  # fmt: skip


class JudgeSpec(Strict):
    name: str
    model: str | None = Field(None, description="Model name; None means EVAL_JUDGE_MODEL.")
    base_url: str | None = None
    identity: str | None = Field(
        None,
        description="Part of the judge cache key instead of the endpoint, for several endpoints that serve the same "
        "judge (replicas of one model server): their answers are then shared. Default: the endpoint.",
    )
    mode: Literal["online", "batch"] | None = Field(
        None,
        description="How this judge is asked: online (a request per prompt) or batch (the provider's Batch API, "
        "answers within the batch window at its batch price). Not part of the judge's identity or cache key: the same "
        "judge either way. Default: EVAL_JUDGE_MODE.",
    )
    temperature: float = 0.0
    seed: int | None = 7
    max_tokens: int = Field(800, ge=1, le=100_000, description="The longest answer asked for, in tokens.")
    top_logprobs: int = Field(
        0,
        ge=0,
        le=20,
        description="Ask for the score tokens' log probabilities (logprobs: true, top_logprobs: N; OpenAI and vLLM "
        "return them): the distribution over the scale and the expected score are recorded. 0: not asked.",
    )
    extra_body: JSONObject = Field(
        default_factory=dict,
        description="Server-specific request options sent as they are (llama.cpp's repeat_penalty, top_k, min_p; "
        "vLLM's top_k ...). Part of the judge's identity and cache key. The pipeline's own fields (model, "
        "messages, temperature, seed, max_tokens, response_format, logprobs, top_logprobs, n, stream) cannot be set "
        "here.",
    )

    @field_validator("extra_body", mode="before")
    @classmethod
    def _extra_body_bounded(cls, value: object) -> object:
        """At most ``EXTRA_BODY_DEPTH`` levels and ``EXTRA_BODY_BYTES`` of JSON: options for a server, not data."""
        depth, todo = 0, [(value, 1)]
        while todo:
            node, level = todo.pop()
            depth = max(depth, level)
            if depth > EXTRA_BODY_DEPTH:
                raise ValueError(f"extra_body is nested more than {EXTRA_BODY_DEPTH} levels deep")
            if isinstance(node, dict):
                todo += [(v, level + 1) for v in node.values()]
            elif isinstance(node, list):
                todo += [(v, level + 1) for v in node]
        size = len(json.dumps(value, default=str))
        if size > EXTRA_BODY_BYTES:
            raise ValueError(f"extra_body is {size:,} bytes as JSON: at most {EXTRA_BODY_BYTES:,}")
        return value

    @field_validator("extra_body")
    @classmethod
    def _extra_body(cls, value: JSONObject) -> JSONObject:
        owned = sorted(set(value) & OWNED_REQUEST_FIELDS)
        if owned:
            raise ValueError(f"{owned} are set by the pipeline (use the judge's own fields), not in extra_body")
        try:
            json.dumps(value, allow_nan=False)
        except RecursionError:
            raise ValueError("extra_body is nested too deeply to send as JSON") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"extra_body must be plain JSON values: {exc}") from None
        return value


class JudgePanel(Strict):
    judges: list[JudgeSpec] = Field(default_factory=list)
    aggregate: Literal["mean", "median"] = "mean"
    score_source: Literal["expected", "chosen"] = Field(
        "expected",
        description="What feeds the scores when a judge returned token probabilities: the expected score over the "
        "scale (G-Eval) or the score it wrote. Without probabilities the written score is used.",
    )

    @field_validator("judges")
    @classmethod
    def _one_name_each(cls, judges: list[JudgeSpec]) -> list[JudgeSpec]:
        """A judge's name keys its rows and its cache: two of one name would mix their scores."""
        names = [j.name for j in judges]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"judge name(s) {twice} given twice: each judge of a panel needs its own name")
        return judges


class Completeness(Strict):
    """How much may be missing before a checkpoint's results are called incomplete: the `judge_completeness`
    asset check fails and `eval-pipeline run` exits 4. Shares, from 0 to 1."""

    max_missing_judge_scores: float = Field(
        0.05, ge=0, le=1, description="Share of the panel's dimension scores missing (no usable judge answer)."
    )
    max_quarantined_lines: float = Field(0.10, ge=0, le=1, description="Share of the lines read that were quarantined.")
    max_rejected_rating_rows: float = Field(
        0.10, ge=0, le=1, description="Share of this checkpoint's rating rows that were quarantined."
    )
    rating_files_rejected: bool = Field(
        False, description="Whether a rating file rejected whole (its header lacks a required column) is tolerated."
    )
