"""Aligning a judge to people's ratings: what may be searched (``align:`` in the rubric YAML), and what was adopted.

An alignment searches judge configurations on part of the pooled rated samples and keeps another part apart
(held out) to decide whether the chosen configuration agrees with people better than the judge it would replace.
What it may change is declared here; the search itself is ``eval_pipeline.judge.align``.

Adopting an alignment writes ``<rubric dir>/aligned/<rubric>.yaml``: the chosen configuration and the record of
what it was tuned on (``aligned:``), a file a person reviews. The loader lays it over the rubric (``overlay``), so
the judge's prompt version changes (a new judge identity) and the rubric's own file stays as its authors wrote
it. Deleting the file returns to the old judge. The keys it may set are ``OVERLAY_KEYS``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pydantic import Field

from eval_pipeline.core.strict import Strict

ALIGNED_DIR = "aligned"  # beside the rubric files: <rubric dir>/aligned/<rubric>.yaml
OVERLAY_KEYS = ("aligned", "judge_instructions", "few_shot", "panel", "heuristic_weights", "anchors")


class AlignSpec(Strict):
    """What an alignment may search and how it stops. Every list's first entry is the current judge's setting."""

    holdout_share: float = Field(
        0.3,
        gt=0,
        lt=1,
        description="The share of rated samples kept apart (stratified by the people's score, seeded): never used "
        "for tuning; the chosen configuration is compared with the current judge on them.",
    )
    folds: int = Field(4, ge=2, le=20, description="Cross-validation folds of the tuning share.")
    seed: int = 20260117
    instructions: list[str] = Field(
        default_factory=list,
        description="Alternative judge instructions the rubric allows (each replaces judge_instructions in a "
        "candidate; the current instructions are always a candidate).",
    )
    anchors: list[dict[str, dict[int, str]]] = Field(
        default_factory=list,
        description="Alternative score-anchor wordings: each a mapping dimension -> score -> the anchor's text, "
        "replacing those anchors in a candidate (the rubric's own wording is always a candidate).",
    )
    few_shot: list[int] = Field(
        default_factory=lambda: [0, 3],
        description="How many rated samples (with the people's scores and notes) a candidate shows the judge, drawn "
        "from the tuning folds only (stratified by score).",
    )
    score_sources: list[str] = Field(
        default_factory=list,
        description="Where a candidate's scores come from: 'chosen' (the written score) or 'expected' (over token "
        "probabilities; asks for top_logprobs). Empty: the rubric's own only.",
    )
    temperatures: list[float] = Field(default_factory=list, description="Sampling temperatures to try (empty: as set).")
    weight_steps: list[float] = Field(
        default_factory=lambda: [0.25, 0.5, 2.0, 4.0],
        description="The offline judge: each feature's weight multiplied by these in turn (coordinate search).",
    )
    max_candidates: int = Field(24, ge=1, description="Candidates tried at most, the current judge included.")
    max_calls: int = Field(5000, ge=0, description="Judge calls at most (cache hits are free); 0: no limit.")
    max_cost: float | None = Field(None, ge=0, description="Money at most, in the price table's currency.")
    patience: int = Field(
        8, ge=1, description="Stop after this many candidates in a row that do not beat the best so far."
    )
    min_gain: float = Field(
        0.0,
        ge=0,
        description="The held-out gain in quadratic kappa the paired interval's lower end must exceed to recommend.",
    )


class AlignedJudge(Strict):
    """The record of an adopted alignment (in the overlay file): which alignment, from which judge, and the rated
    samples it was tuned on. Part of the judge's prompt version, so the aligned judge is a judge of its own, and
    ``tuned_on`` (``checkpoint/sample``) never enters its calibration set."""

    id: str
    from_prompt_version: str = Field(description="The prompt version of the judge it was aligned from.")
    dimensions: list[str] = Field(default_factory=list)
    config: str = Field("", description="The chosen configuration, as a person reads it.")
    tuned_on: list[str] = Field(default_factory=list, description="checkpoint/sample ids used for tuning or shown.")
    held_out: list[str] = Field(default_factory=list, description="checkpoint/sample ids kept apart.")


def overlay_path(rubric_file: Path) -> Path:
    """Where an adopted alignment of the rubric in ``rubric_file`` is written."""
    return rubric_file.parent / ALIGNED_DIR / f"{rubric_file.stem}.yaml"


def overlay(raw: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """The rubric's YAML mapping with an alignment's settings laid over it: ``judge_instructions``, ``few_shot``,
    ``aligned`` replace; ``panel`` is merged key by key (its ``judges`` by name); ``heuristic_weights``
    (dimension -> feature -> weight) sets those terms' weights; ``anchors`` (dimension -> score -> text) rewords
    those levels' anchors. Raises ValueError for a key it does not know or a
    weight for a feature the dimension does not use."""
    unknown = sorted(set(over) - set(OVERLAY_KEYS))
    if unknown:
        raise ValueError(f"unknown keys {unknown} (an alignment sets only {', '.join(OVERLAY_KEYS)})")
    out = copy.deepcopy(raw)
    for key in ("aligned", "judge_instructions", "few_shot"):
        if key in over:
            out[key] = copy.deepcopy(over[key])
    if "panel" in over:
        panel = dict(out.get("panel") or {})
        for key, value in over["panel"].items():
            if key != "judges":
                panel[key] = value
        if "judges" in over["panel"]:
            by_name = {j.get("name"): dict(j) for j in panel.get("judges") or []}
            for j in over["panel"]["judges"]:
                by_name[j["name"]] = {**by_name.get(j["name"], {}), **j}
            panel["judges"] = list(by_name.values())
        out["panel"] = panel
    for dim, weights in (over.get("heuristic_weights") or {}).items():
        holder = _heuristic_holder(out, dim)
        if holder is None:
            raise ValueError(f"heuristic_weights: no dimension or questionnaire metric {dim!r}")
        terms = {t.get("feature"): t for t in holder.get("heuristic") or []}
        for feature, weight in weights.items():
            if feature not in terms:
                raise ValueError(f"heuristic_weights.{dim}: {dim!r} uses no feature {feature!r}")
            terms[feature]["weight"] = float(weight)
    for dim, levels in (over.get("anchors") or {}).items():
        found = next((d for d in out.get("dimensions") or [] if d.get("key") == dim), None)
        if found is None:
            raise ValueError(f"anchors: no dimension {dim!r}")
        known = {int(k) for k in (found.get("levels") or {})}
        for level, text in levels.items():
            if int(level) not in known:
                raise ValueError(f"anchors.{dim}: {dim!r} has no score {level}")
            found["levels"] = {**{int(k): v for k, v in found["levels"].items()}, int(level): str(text)}
    return out


def _heuristic_holder(raw: dict[str, Any], key: str) -> dict[str, Any] | None:
    for d in raw.get("dimensions") or []:
        if d.get("key") == key:
            return d  # type: ignore[no-any-return]
    for m in (raw.get("questionnaire") or {}).get("metrics") or []:
        if m.get("key") == key:
            return m  # type: ignore[no-any-return]
    return None
