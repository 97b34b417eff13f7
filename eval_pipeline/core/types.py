"""Names for the data the pipeline cannot type further, each saying why: the one place ``Any`` stands for them.

Everything else is typed; a new ``Any`` outside this module says in a comment why the data has no type."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

# A sample's fields as a checkpoint's JSONL line gives them: JSON whose names and types the rubric's YAML defines,
# different for every rubric (the rubric's pandera schema has validated them before anything reads them).
Record: TypeAlias = dict[str, Any]

# One row of a warehouse table, or of a frame about to become one: column name -> that column's value (text, a
# number, a boolean, a timestamp, None). Which columns a table has is fixed in core.contracts; their types are the
# frame's dtypes, decided when the rows become a frame.
Row: TypeAlias = dict[str, Any]

# A JSON object as an endpoint, a file or a YAML document gave it, before it is checked: a request or answer body, a
# JSON schema, a manifest, a rubric's free ``params`` before their model validates them.
JSONObject: TypeAlias = dict[str, Any]

# What a metric gives for a batch of records: column name -> one value per record, in the records' order (a number,
# a flag, a label, or None where the metric does not apply).
Value: TypeAlias = float | int | str | bool | None
Columns: TypeAlias = Mapping[str, Sequence[Value]]
