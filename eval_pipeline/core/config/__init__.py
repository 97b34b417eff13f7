"""Rubric configuration: typed models for the YAML files in ``rubric_configs/``, split by concept.

A rubric YAML declares everything the pipeline needs to evaluate one rubric: the
input fields a sample must carry (:mod:`.inputs`), the dimensions with their scales
and anchors (:mod:`.dimensions`), derived scores (:mod:`eval_pipeline.core.derived`),
how it is run (:mod:`.protocol`), and its gates (:mod:`.gates`). Loading validates it
(:mod:`.rubric`); a wrong config fails with a :class:`RubricConfigError` naming the
file, the field and the problem. The SHA-256 of the canonical config is the rubric's
version: the Dagster code version of every asset built from it.
"""

from eval_pipeline.core.config.dimensions import (
    ChecklistItem,
    Dimension,
    Example,
    HeuristicTerm,
    Questionnaire,
    QuestionnaireItem,
    QuestionnaireMetric,
    Scale,
)
from eval_pipeline.core.config.gates import Gate
from eval_pipeline.core.config.inputs import FieldType, InputField, InputsSpec
from eval_pipeline.core.config.protocol import (
    Adjustment,
    Completeness,
    Extraction,
    HumanRatingsSpec,
    JudgePanel,
    JudgeSpec,
    MetricSpec,
    PassFail,
    RepeatSpec,
    ReReview,
    WorklistSpec,
)
from eval_pipeline.core.config.rubric import (
    RubricConfig,
    RubricConfigError,
    parse_rubric,
    parse_rubrics,
    rubric_hash,
)
from eval_pipeline.core.derived import DerivedScore
from eval_pipeline.core.derived.band import Band, BandScore
from eval_pipeline.core.derived.linear import LinearScore
from eval_pipeline.core.derived.mean import MeanScore
from eval_pipeline.core.derived.metric import MetricScore
from eval_pipeline.core.derived.rules import Condition, RulesScore, StatusRule
from eval_pipeline.core.derived.sum import SumScore
from eval_pipeline.core.derived.weighted_mean import WeightedMeanScore

__all__ = [
    "Adjustment",
    "Completeness",
    "Band",
    "BandScore",
    "ChecklistItem",
    "Condition",
    "DerivedScore",
    "Dimension",
    "Example",
    "Extraction",
    "FieldType",
    "Gate",
    "HeuristicTerm",
    "HumanRatingsSpec",
    "InputField",
    "InputsSpec",
    "JudgePanel",
    "RepeatSpec",
    "JudgeSpec",
    "LinearScore",
    "MeanScore",
    "MetricScore",
    "MetricSpec",
    "PassFail",
    "Questionnaire",
    "QuestionnaireItem",
    "QuestionnaireMetric",
    "ReReview",
    "RubricConfig",
    "RubricConfigError",
    "RulesScore",
    "Scale",
    "StatusRule",
    "SumScore",
    "WeightedMeanScore",
    "WorklistSpec",
    "parse_rubric",
    "parse_rubrics",
    "rubric_hash",
]
