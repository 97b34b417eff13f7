"""What a person (or a CI job) sees of a run: a progress line, a summary per checkpoint, and an exit code.

Exit codes (documented in the README):
  0  every checkpoint evaluated, every gate passed, the data complete
  1  a run failed (a step raised; its error is printed in one line)
  2  a usage or configuration error (bad arguments, an invalid rubric YAML)
  3  gates failed (unless --no-fail-on-gates)
  4  incomplete data: judge scores missing, lines quarantined or rating rows rejected above the rubric's
     `completeness` thresholds, or a rating file rejected whole
  130  interrupted (Ctrl-C); what finished is listed
When several apply, the first in the order 1, 4, 3 wins.
"""

from eval_pipeline.console.evaluate import OtherRuns, dagster_log_level, evaluate
from eval_pipeline.console.lines import followed_lines, usage_line
from eval_pipeline.console.progress import Progress
from eval_pipeline.console.verdicts import (
    MEANINGS,
    UNDECIDED,
    checkpoint_line,
    closing_line,
    decided,
    exit_code,
    report_lines,
    shorten,
    what_next,
)

__all__ = ["MEANINGS", "UNDECIDED", "OtherRuns", "Progress", "checkpoint_line", "closing_line", "dagster_log_level"]
__all__ += ["decided", "evaluate", "exit_code", "followed_lines", "report_lines", "shorten", "usage_line", "what_next"]
