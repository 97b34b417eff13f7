"""Threshold gates: kinds registered by name, one module each, evaluated per checkpoint.

A gate kind is a function decorated with :func:`gate`, taking its typed spec (a
:class:`GateSpec` subclass naming the fields it requires), the rubric, the scores and
the :class:`GateInputs` (other tables, loaded on demand), and returning a
:class:`GateResult`, or a list whose first item is the gate and the rest its per-part
results (each also an asset check). Adding a kind is one new module in this package.
A gate with too little data fails closed and says why; missing scores count as
missing (they shrink n), never as passes.
"""

from eval_pipeline.scoring.gates.base import GateInputs, GateResult, GateSpec
from eval_pipeline.scoring.gates.kinds import (
    GATES,
    GateFn,
    GateKind,
    evaluate_gate,
    evaluate_gates,
    gate,
    gate_frame,
    gate_kind,
    gate_rows,
    load_kinds,
    other_checkpoints,
    spec_problems,
    typed,
)

__all__ = [
    "GATES",
    "GateFn",
    "GateInputs",
    "GateKind",
    "GateResult",
    "GateSpec",
    "evaluate_gate",
    "evaluate_gates",
    "gate",
    "gate_frame",
    "gate_kind",
    "gate_rows",
    "load_kinds",
    "other_checkpoints",
    "spec_problems",
    "typed",
]
