"""The code of eval_pipeline.scoring.gates: its contract is the package's docstring."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pydantic import ValidationError

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import GATE_COLUMNS
from eval_pipeline.core.registry import Registry
from eval_pipeline.core.resampling import in_item_order
from eval_pipeline.core.types import Row
from eval_pipeline.scoring.gates.base import FAILED, PENDING, GateInputs, GateResult, GateSpec

# (its spec, a GateSpec subclass of the kind's own: Any here, since each kind takes its own; the rubric; the scores;
# the other tables) -> the gate's result, or the gate and its parts
GateFn = Callable[[Any, RubricConfig, pd.DataFrame, GateInputs], "GateResult | list[GateResult]"]


@dataclass(frozen=True)
class GateKind:
    name: str
    fn: GateFn
    spec: type[GateSpec]
    needs: tuple[str, ...]  # tables of the rubric the gate reads (asset names): the gates asset depends on them
    check_target: str | None  # the asset its asset check is shown on (None: the gates asset)
    parts: Callable[[Any, RubricConfig], list[str]] | None  # names of its per-part results, known from the config
    # the other checkpoints a gate of the kind reads (its typed spec -> ids): their rows are part of what a
    # checkpoint's gates are decided from
    checkpoints: Callable[[Any], list[str]] | None = None


# loaded on first read, so the kinds' own imports (e.g. agreement) may import this package's base without a cycle
GATES: Registry[GateKind] = Registry(
    "gate kind",
    "eval_pipeline.scoring.gates",
    skip=(
        "base",
        "kinds",
    ),
)


def load_kinds() -> Registry[GateKind]:
    """Every gate kind (importing this package's modules registers them)."""
    return GATES.load()


def gate(
    name: str,
    *,
    spec: type[GateSpec] = GateSpec,
    needs: Sequence[str] = (),
    check_target: str | None = None,
    parts: Callable[[Any, RubricConfig], list[str]] | None = None,
    checkpoints: Callable[[Any], list[str]] | None = None,
) -> Callable[[GateFn], GateFn]:
    """Register a gate kind under ``name``."""

    def register(fn: GateFn) -> GateFn:
        GATES.add(name, GateKind(name, fn, spec, tuple(needs), check_target, parts, checkpoints))
        return fn

    return register


def gate_kind(name: str) -> GateKind:
    return GATES.get_unit(name)


def other_checkpoints(rubric: RubricConfig) -> list[str]:
    """The checkpoints the rubric's gates read besides each checkpoint and its parent (a pinned baseline)."""
    out: set[str] = set()
    for g in rubric.gates:
        kind = gate_kind(g.kind)
        if kind.checkpoints is not None:
            out.update(kind.checkpoints(typed(g)))
    return sorted(out)


def typed(g: Any) -> GateSpec:
    """The rubric's gate as its kind's typed spec (raises ValidationError naming a missing field)."""
    return gate_kind(g.kind).spec.model_validate(g.model_dump(exclude_none=True))


def spec_problems(g: Any) -> list[tuple[str, str]]:
    """What is wrong with a gate for its kind, as (field, problem): an unknown kind, fields the kind needs."""
    if g.kind not in load_kinds():
        return [("kind", f"unknown gate kind {g.kind!r} (known: {', '.join(sorted(GATES))})")]
    try:
        typed(g)
    except ValidationError as exc:
        return [(".".join(map(str, e["loc"])) or "kind", f"{e['msg']} (gate kind {g.kind!r})") for e in exc.errors()]
    return []


def evaluate_gate(
    g: Any, rubric: RubricConfig, scores: pd.DataFrame, inputs: GateInputs | None = None
) -> list[GateResult]:
    kind = gate_kind(g.kind)
    spec = typed(g)
    out = kind.fn(spec, rubric, scores, inputs or GateInputs())
    results = out if isinstance(out, list) else [out]
    for r in results:
        if r.value is not None and r.value == r.value:
            r.value = round(float(r.value), 12) + 0.0  # -2.2e-16 is 0: a value's last bits are not a result
        if r.status == PENDING and spec.params.pending_fails:
            r.status = FAILED  # the rubric asks that "not enough data yet" fail
    return results


def gate_rows(
    rubric: RubricConfig,
    checkpoint_id: str,
    scores: pd.DataFrame,
    inputs: GateInputs | None = None,
    reading: str | None = None,
) -> list[Row]:
    """Every gate's rows of one checkpoint as records (``reading``: only the gates whose kind reads that asset's
    tables); ``gate_frame`` makes them the stored table's frame."""
    scores = in_item_order(scores, ["sample_id"])  # a mean's last bits do not depend on the warehouse's row order
    chosen = [g for g in rubric.gates if reading is None or reading in gate_kind(g.kind).needs]
    results = [r for g in chosen for r in evaluate_gate(g, rubric, scores, inputs)]
    return [
        dict(
            checkpoint_id=checkpoint_id,
            gate=r.gate,
            kind=r.kind,
            value=r.value,
            threshold=r.threshold,
            passed=bool(r.passed),
            n=int(r.n),
            reason=r.reason,
            rubric_version=rubric.version,
            status=r.status,
        )
        for r in results
    ]


def gate_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """Gate rows (``gate_rows``, of one checkpoint or several) as the stored table's frame."""
    return pd.DataFrame(list(rows), columns=GATE_COLUMNS).astype(
        {"value": "float64", "threshold": "float64", "passed": "bool", "n": "int64"}
    )


def evaluate_gates(
    rubric: RubricConfig,
    checkpoint_id: str,
    scores: pd.DataFrame,
    inputs: GateInputs | None = None,
    reading: str | None = None,
) -> pd.DataFrame:
    """Every gate's rows of one checkpoint (``gate_rows`` as a frame)."""
    return gate_frame(gate_rows(rubric, checkpoint_id, scores, inputs, reading))
