"""Bring outputs a team already has (#75): ``eval-pipeline import FORMAT PATH`` writes a checkpoint folder the
checkpoint sensor evaluates. One module a format, registered in ``IMPORTERS``; the mapping and the writing are
shared (``base``, ``write``)."""

from eval_pipeline.ingest.importers.base import IMPORTERS, Format, ImportFailure, Mapping, Record, get
from eval_pipeline.ingest.importers.write import Outcome, rows, write_checkpoint

__all__ = ["IMPORTERS", "Format", "ImportFailure", "Mapping", "Outcome", "Record", "get", "rows", "write_checkpoint"]
