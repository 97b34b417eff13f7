"""What a run of a command's checkpoints came to (``RunOutcome``), and the checkpoints' ranges a run covers
(``Ranges``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from eval_pipeline.core import settings
from eval_pipeline.defs.partitions import CHECKPOINTS_PARTITION


@dataclass
class RunOutcome:
    checkpoint_id: str
    rubrics: list[str]
    success: bool
    seconds: float
    run_id: str
    failures: list[str] = field(default_factory=list)  # "<step>: <first line of its error>"
    interrupted: bool = False
    report: Path | None = None  # the report, when it was drawn after this run (the command's last)
    report_error: str | None = None  # why it could not be (the run's outcome does not depend on it)
    run_ids: list[str] = field(default_factory=list)  # every run of this checkpoint in the command, run_id last
    # outside the command: "ratings" (other checkpoints' ratings read again, and every checkpoint decided after)
    purpose: str = "evaluate"
    notes: list[str] = field(default_factory=list)  # what happened to the run on the way (a worker that died)

    def of(self, ckpt_id: str, rubrics: list[str]) -> RunOutcome:
        """This run's outcome as one of its checkpoints' (a run over several: each gets its own copy)."""
        return RunOutcome(
            ckpt_id,
            rubrics,
            self.success,
            self.seconds,
            self.run_id,
            list(self.failures),
            self.interrupted,
            run_ids=list(self.run_ids),
            purpose=self.purpose,
            notes=list(self.notes),
        )

    def absorb(self, later: RunOutcome) -> None:
        """A later run of the same checkpoint (the automation's re-decision), folded into this outcome."""
        self.success &= later.success
        self.failures += later.failures
        self.notes += later.notes
        self.seconds += later.seconds
        self.run_ids += later.run_ids
        self.run_id = later.run_id or self.run_id
        self.interrupted |= later.interrupted


class Ranges:
    """A command's checkpoints as runs: consecutive ones (in the order they were registered as partitions) with the
    same rubric groups together, at most ``EVAL_BACKFILL_CHUNK`` a run (the graph's backfill policy), so N
    checkpoints take ⌈N / chunk⌉ runs; checkpoints apart in that order are never run with the ones between."""

    def __init__(self, instance: dg.DagsterInstance, todo: list[tuple[str, str, list[str]]]) -> None:
        self.order = {c: i for i, c in enumerate(instance.get_dynamic_partitions(CHECKPOINTS_PARTITION))}
        self.todo = todo

    def runs(self) -> list[tuple[list[str], list[str]]]:
        """(checkpoints, rubric groups) of each run, in the command's order."""
        chunk = settings.backfill_chunk()
        out: list[tuple[list[str], list[str]]] = []
        for ckpt, _model, names in self.todo:
            if out:
                last, same = out[-1]
                follows = self.order.get(ckpt, -2) == self.order.get(last[-1], -9) + 1
                if same == names and follows and len(last) < chunk:
                    last.append(ckpt)
                    continue
            out.append(([ckpt], list(names)))
        return out
