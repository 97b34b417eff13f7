"""Loading rubrics: the config models (``core.config``) checked against the registries they name (gate kinds and
their fields, metric functions and their parameters, heuristic features and theirs). This module stands above
the registries, so the config layer never imports them."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.core import params
from eval_pipeline.core.config import RubricConfig, parse_rubric, parse_rubrics
from eval_pipeline.judge.heuristic import load_features
from eval_pipeline.metrics import METRICS, known_metrics
from eval_pipeline.scoring.gates import spec_problems


def load_rubric(path: str | Path) -> RubricConfig:
    """One rubric YAML, every problem reported at once (types, references, registry names)."""
    return parse_rubric(path, (registry_problems,))


def load_rubrics(directory: str | Path | None = None) -> list[RubricConfig]:
    """Every rubric of ``directory`` (default EVAL_RUBRIC_DIR), each checked against the registries."""
    return parse_rubrics(directory, (registry_problems,))


def registry_problems(cfg: RubricConfig) -> list[tuple[str, str]]:
    """Names the config takes from the registries (gate kinds and their fields, metric functions), checked
    against them. The registries are looked up here, at load time, not imported by the config models."""
    problems: list[tuple[str, str]] = []
    for g in cfg.gates:
        problems += [(f"gates.{g.name}.{field}", msg) for field, msg in spec_problems(g)]
    metrics = set(known_metrics())
    for m in cfg.metrics:
        if m.function in metrics:
            problems += [
                (f"metrics.{m.function}.params", msg) for msg in params.problems(METRICS[m.function], m.params)
            ]
        else:
            problems.append(
                (
                    f"metrics.{m.function}",
                    f"unknown metric function {m.function!r} (known: {', '.join(sorted(metrics))})",
                )
            )
    features = load_features()
    holders = [(f"dimensions.{d.key}", d.heuristic) for d in cfg.dimensions]
    if cfg.questionnaire:
        holders += [(f"questionnaire.metrics.{m.key}", m.heuristic) for m in cfg.questionnaire.metrics]
    for where, terms in holders:
        for term in terms:
            if term.feature not in features:
                problems.append((f"{where}.heuristic.{term.feature}", f"unknown heuristic feature {term.feature!r}"))
            else:
                problems += [
                    (f"{where}.heuristic.{term.feature}.params", msg)
                    for msg in params.problems(features[term.feature], term.params)
                ]
    return problems
