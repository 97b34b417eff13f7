"""Bring outputs a team already has (#75): ``eval-pipeline import FORMAT PATH`` writes a checkpoint folder the
checkpoint sensor evaluates. One module a format, registered in ``IMPORTERS``; the mapping, the writing and one
import from start to end are shared (``base``, ``write``, ``run``)."""

from eval_pipeline.ingest.importers.base import IMPORTERS, Format, ImportFailure, Mapping, Record, get
from eval_pipeline.ingest.importers.run import Outcome, Request, import_file
from eval_pipeline.ingest.importers.write import Converted, rows, write_checkpoint

__all__ = [
    "IMPORTERS",
    "Converted",
    "Format",
    "ImportFailure",
    "Mapping",
    "Outcome",
    "Record",
    "Request",
    "get",
    "import_file",
    "rows",
    "write_checkpoint",
]
