"""Validation of identifiers that reach SQL or the file system.

Checkpoint ids, rubric names and evaluator names are checked here before they
are used in a path, a table name or a query; anything unsafe is refused with a
clear message.
"""

from __future__ import annotations

import re

# Lowercase identifiers: rubric names, dimension keys, gate names, SQL schema names.
IDENTIFIER_RE = re.compile(r"[a-z][a-z0-9_]{0,62}")
# Checkpoint ids: letters, digits, dot, underscore, dash; must start alphanumeric; no "..".
CHECKPOINT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Evaluator names (from CSVs): the checkpoint id's alphabet, so a name is one token in a file name, a URL or a log.
EVALUATOR_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class UnsafeIdentifierError(ValueError):
    """An identifier that must not reach SQL or a path."""


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_identifier(value: str, what: str = "identifier") -> str:
    if not isinstance(value, str) or not IDENTIFIER_RE.fullmatch(value):
        raise UnsafeIdentifierError(
            f"unsafe {what} {_describe(value)}: use 1-63 lowercase letters, digits or '_', starting with a letter"
        )
    return value


# Names the warehouse gives a meaning of its own (agreement rows over every checkpoint are "ALL").
RESERVED_CHECKPOINT_IDS = frozenset({"all"})


def check_checkpoint_id(value: str) -> str:
    if not isinstance(value, str) or not CHECKPOINT_RE.fullmatch(value) or ".." in value:
        raise UnsafeIdentifierError(
            f"unsafe checkpoint id {_describe(value)}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, without '..', quotes, slashes or whitespace"
        )
    if value.lower() in RESERVED_CHECKPOINT_IDS:
        raise UnsafeIdentifierError(
            f"reserved checkpoint id {_describe(value)}: the warehouse uses it for all checkpoints"
        )
    return value


def check_evaluator(value: str) -> str:
    if not isinstance(value, str) or not EVALUATOR_RE.fullmatch(value) or value != value.strip():
        raise UnsafeIdentifierError(
            f"unsafe evaluator name {_describe(value)}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (no spaces, '@' or ':')"
        )
    return value
