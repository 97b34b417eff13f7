"""``judge_reliability``: the judge agrees with the human mean (quadratic kappa >= threshold, Spearman >=
``params.min_spearman``) on every rated dimension and lands within ``params.example_tolerance`` of the rubric
document's worked examples; one result per dimension beside the overall one, shown beside the judge's scores."""

from eval_pipeline.agreement.reliability import dimension_results, evaluate_judge_reliability
from eval_pipeline.scoring.gates import gate
from eval_pipeline.scoring.gates.base import GateResult


def _parts(g, rubric) -> list[str]:
    judged = bool(rubric.judged_dimensions or rubric.questionnaire)
    return [f"{g.name}_{d}" for d in rubric.rating_scales] if judged else []


@gate("judge_reliability", needs=("agreement", "judge_calibration"), check_target="judge_scores", parts=_parts)
def judge_reliability(g, rubric, scores, inputs) -> list[GateResult]:
    agreement = inputs.table("agreement")
    if agreement is None:
        return [
            GateResult(
                g.name,
                g.kind,
                None,
                g.threshold,
                False,
                0,
                "fails closed: no judge-human agreement available for this checkpoint",
            )
        ]
    calibration = inputs.table("judge_calibration")
    return [
        evaluate_judge_reliability(g, rubric, agreement, calibration),
        *dimension_results(g, rubric, agreement, calibration),
    ]
