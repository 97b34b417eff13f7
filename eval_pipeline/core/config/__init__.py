"""Rubric configuration: typed models for the YAML files in ``rubric_configs/``, split by concept.

A rubric YAML declares everything the pipeline needs to evaluate one rubric: the
input fields a sample must carry (:mod:`.inputs`), the dimensions with their scales
and anchors (:mod:`.dimensions`), derived scores (:mod:`eval_pipeline.core.derived`),
how it is run (:mod:`.protocol`), and its gates (:mod:`.gates`). Loading validates it
(:mod:`.rubric`); a wrong config fails with a :class:`RubricConfigError` naming the
file, the field and the problem. The SHA-256 of the canonical config is the rubric's
version: the Dagster code version of every asset built from it.
"""

from eval_pipeline.core.config.dimensions import Dimension, Example, HeuristicTerm, Questionnaire, Scale
from eval_pipeline.core.config.gates import Gate
from eval_pipeline.core.config.inputs import InputField, InputsSpec
from eval_pipeline.core.config.protocol import JudgePanel, JudgeSpec, RepeatSpec
from eval_pipeline.core.config.rubric import RubricConfig, RubricConfigError, parse_rubric, parse_rubrics, rubric_hash
from eval_pipeline.core.derived import DerivedScore
from eval_pipeline.core.derived.band import BandScore
from eval_pipeline.core.derived.rules import RulesScore

__all__ = ["BandScore", "DerivedScore", "Dimension", "Example", "Gate", "HeuristicTerm", "InputField", "InputsSpec"]
__all__ += ["JudgePanel", "JudgeSpec", "Questionnaire", "RepeatSpec", "RubricConfig", "RubricConfigError", "RulesScore"]
__all__ += ["Scale", "parse_rubric", "parse_rubrics", "rubric_hash"]
