"""Loading rubrics: the config models (``core.config``) checked against the registries they name (gate kinds and
their fields, metric functions and their parameters, heuristic features and theirs). This module stands above
the registries, so the config layer never imports them."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.core import params, settings
from eval_pipeline.core.config import RubricConfig, RubricConfigError, parse_rubric, parse_rubrics
from eval_pipeline.judge.heuristic import load_features
from eval_pipeline.metrics import METRICS, known_metrics
from eval_pipeline.scoring.gates import spec_problems


def load_rubric(path: str | Path) -> RubricConfig:
    """One rubric YAML, every problem reported at once (types, references, registry names)."""
    return parse_rubric(path, (registry_problems,))


def rubric_file(folder: Path, name: str) -> Path | None:
    """The file of rubric ``name`` in ``folder`` (``<name>.yaml`` or ``.yml``), if there is one."""
    return next((p for p in (folder / f"{name}.yaml", folder / f"{name}.yml") if p.is_file()), None)


def load_rubrics(directory: str | Path | None = None) -> list[RubricConfig]:
    """Every rubric of ``directory`` (default EVAL_RUBRIC_DIR), each checked against the registries; one broken
    file fails the whole load, with every problem of every file (the CLI, the demo, `make lint`)."""
    return parse_rubrics(directory, (registry_problems,))


def load_rubrics_leniently(directory: str | Path | None = None) -> tuple[list[RubricConfig], dict[str, str]]:
    """The rubrics that load, and for each file that does not, its name (the file's stem) and every problem: for
    the long-running code location, where one broken file must not take the other groups and their sensors out
    of the UI."""
    folder = Path(directory) if directory else settings.rubric_dir()
    files = sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))
    good, broken = [], {}
    for f in files:
        try:
            good.append(load_rubric(f))
        except RubricConfigError as exc:
            broken[f.stem] = str(exc)
    if not good and not broken:
        load_rubrics(folder)  # no file at all: the strict load says so
    return good, broken


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
                (f"metrics.{m.function}.params", msg)
                for msg in params.problems(params.params_model(METRICS[m.function]), m.params)
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
                    for msg in params.problems(params.params_model(features[term.feature]), term.params)
                ]
    return problems
