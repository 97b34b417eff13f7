"""Judging through the provider's Batch API (EVAL_JUDGE_MODE=batch, or a panel entry's ``mode: batch``).

``answer`` takes the prompts a judge step could not answer from the cache (judge.cached) and, for each, does what
its record says (judge.batch.records):

* never sent: written as Batch input lines (``custom_id`` = the prompt's cache key; the body the online client
  would POST, judge.client.request_body), split within the provider's limits (``MAX_LINES`` requests,
  ``MAX_FILE_BYTES`` a file), its cost reserved whole from the run's budget at the batch price (a line the budget
  does not cover is not sent: missing with the reason ``budget``), recorded, uploaded and created;
* in a batch still working: pending, ``pending: judge batch <id> <state> (<n> of <N> done)``;
* in a batch that ended (completed, expired, cancelled, failed, or lost by the provider): its result and error
  files read, each line exactly as an online answer is read (judge.reply: redaction, token log probabilities,
  usage; judge.client.settle: parsing, a cut-off answer) and handed to ``on_answer`` (the cache). A line that
  failed, an answer that could not be used, and a prompt the batch never answered are asked once more (in a new
  batch, or online with EVAL_JUDGE_BATCH_RETRY=online); after that they are missing with the reason, never a
  score.

Resuming: a submission is recorded before its file is uploaded and again after each step; a process killed at any
point finds the record and reconciles it with the provider (the uploaded file by its name, the batch by its
metadata) instead of sending again, and answers read from a result file reach the cache before the submission is
marked collected. Who answers is the judge's settings, as online: the cache key and the judge's identity do not
depend on the mode, so batch and online answers of one judge are the same judge's.
"""

from eval_pipeline.judge.batch import records
from eval_pipeline.judge.batch.flow import MAX_FILE_BYTES, MAX_LINES, PENDING, answer, for_step, pending_text
from eval_pipeline.judge.batch.lines import LOST_LOOKS, result_of

__all__ = ["LOST_LOOKS", "MAX_FILE_BYTES", "MAX_LINES", "PENDING", "answer", "for_step", "pending_text", "records"]
__all__ += ["result_of"]
