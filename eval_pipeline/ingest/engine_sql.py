"""The SQL the validation engine runs (ingest.engine): each line routed to the rubric's shape, its fields measured
against the rubric's schema, its values extracted, typed, in DuckDB."""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipeline.core.config import InputField, RubricConfig
from eval_pipeline.ingest.engine_schema import (
    LIST_TYPES,
    PY_WHITESPACE,
    SCALAR_TYPES,
    text_lengths,
)
from eval_pipeline.storage.tables import literal

# leniencies of DuckDB's reader (case-insensitive nan/inf values, 16+ digit numbers, 3-digit exponents, trailing
# commas, escaped surrogates) and a key written with space before its colon (the key count below needs `":`)
SUSPICIOUS = r'(?i)[:,\[]\s*[-+]?(nan|inf)|[0-9]{16}|[eE][+-]?[0-9]{3}|,\s*[\]}]|\\u[dD][89abAB]|"\s+:'


def _path(parts: Sequence[str]) -> str:
    return "$" + "".join('."' + p.replace("\\", "\\\\").replace('"', '\\"') + '"' for p in parts)


def _object_paths(rubric: RubricConfig) -> tuple[list[str], list[str]]:
    """The objects whose keys DuckDB checks for repeats: the root, every object a field path walks through,
    every declared object field; and (second list) every declared list of objects."""
    objects: dict[str, None] = {"$": None}
    lists: dict[str, None] = {}
    for f in rubric.inputs.fields:
        parts = f.json_path
        for k in range(1, len(parts)):
            objects[_path(parts[:k])] = None
        if f.type == "object":
            objects[_path(parts)] = None
        elif f.type == "object_list":
            lists[_path(parts) + "[*]"] = None
    return list(objects), list(lists)


def routed_sql(rubric: RubricConfig, src: str) -> str:
    """Every line of ``src`` with ``__route``: true for the lines Python must judge (decode errors, what DuckDB
    cannot parse or parses too leniently, non-objects, lines whose `":` count differs from the keys of the
    checked objects or whose checked keys repeat), and ``j``, the text DuckDB reads for the others.

    One CASE (its branches in order: a JSON function on text that is not JSON raises) gives each line that
    DuckDB can judge its key lists (a struct: ``ks`` for the objects, ``ls<i>`` per list of objects), used twice
    below; valid JSON whose first character after JSON's whitespace is ``{`` is an object (no parse needed to say
    so); the `":` count is a string split (a replace copied every line: 4x slower on 1M lines)."""
    objects, lists = _object_paths(rubric)
    keysets = [f"'ks': json_keys(raw_line, [{', '.join(map(literal, objects))}])"]
    keysets += [f"'ls{i}': coalesce(json_keys(raw_line, {literal(p)}), [])" for i, p in enumerate(lists)]
    judged = (
        "CASE WHEN decode_error IS NOT NULL THEN NULL WHEN NOT json_valid(raw_line) THEN NULL "
        f"WHEN regexp_matches(raw_line, {literal(SUSPICIOUS)}) THEN NULL "
        "WHEN NOT starts_with(ltrim(raw_line, ' \t\n\r'), '{') THEN NULL "
        f"ELSE {{{', '.join(keysets)}}} END AS k"
    )
    counted = "list_sum(list_transform(k.ks, x -> coalesce(len(x), 0)))"
    repeated = "list_bool_or(list_transform(k.ks, x -> coalesce(len(list_distinct(x)) <> len(x), false)))"
    for i in range(len(lists)):
        counted += f" + coalesce(list_sum(list_transform(k.ls{i}, x -> len(x))), 0)"
        repeated += f" OR coalesce(list_bool_or(list_transform(k.ls{i}, x -> len(list_distinct(x)) <> len(x))), false)"
    text_keys = "len(string_split(raw_line, '\":')) - 1"
    route = f"k IS NULL OR ({text_keys}) <> ({counted}) OR coalesce({repeated}, false)"
    return (
        "(SELECT line_number, __route, CASE WHEN __route THEN raw_line END AS __raw, decode_error AS __decode_error, "
        f"CASE WHEN NOT __route THEN raw_line END AS j FROM (SELECT line_number, raw_line, decode_error, {route} "
        f"AS __route FROM (SELECT line_number, raw_line, decode_error, {judged} FROM {src})))"
    )


_CASTS = {"integer": "::BIGINT", "number": "::DOUBLE", "boolean": "::BOOLEAN"}  # a value's text, typed


def _value_sql(f: InputField, t: str, v: str) -> str:
    """A field's value as its samples column holds it: typed, null when absent or of another type (lists and
    objects: their JSON text, checked by the schema)."""
    types = SCALAR_TYPES.get(f.type, ("OBJECT", "ARRAY"))
    return f"CASE WHEN {t} IN ({', '.join(map(literal, types))}) THEN {v}{_CASTS.get(f.type, '')} END"


def _stripped_length(x: str) -> str:
    """Characters left once Python's whitespace is stripped from both ends (DuckDB's length counts code points,
    as Python and Polars do). Trimming copies the text, so only a text that starts
    or ends with whitespace is trimmed; the first and last characters are cheap to read."""
    ws = literal(PY_WHITESPACE)
    return (
        f"CASE WHEN contains({ws}, {x}[1]) OR contains({ws}, {x}[-1]) THEN length(trim({x}, {ws})) ELSE length({x}) END"
    )


def _paths(rubric: RubricConfig) -> str:
    """Every field's JSON path, as a list literal (one parse of a line reads them all)."""
    return "[" + ", ".join(literal(_path(f.json_path)) for f in rubric.inputs.fields) + "]"


def _parsed(rubric: RubricConfig, lines: str, keep: Sequence[str] = ()) -> str:
    """The lines with ``t`` and ``v``, the JSON type and text at every field's path: one parse each per line."""
    paths, kept = _paths(rubric), "".join(f"{c}, " for c in keep)
    return f"(SELECT line_number, {kept}json_type(j, {paths}) AS t, json_extract_string(j, {paths}) AS v FROM {lines})"


# The JSON types DuckDB's json_type names, as an enum: the measures carry one byte a type, not its name (17 type
# columns of a 245,760-line range: 46 MB of text); a name outside it fails the cast, loudly. Lengths are 32-bit
# (a line is far shorter than 2^31 characters): a range's measures 100 -> 46 MB (1M lines: peak RSS -0.2 GB)
JSON_TYPE = "ENUM('NULL', 'BOOLEAN', 'BIGINT', 'UBIGINT', 'DOUBLE', 'VARCHAR', 'ARRAY', 'OBJECT')"


def measure_sql(rubric: RubricConfig, lines: str, keep: Sequence[str] = ()) -> str:
    """What the schema's rules read of each line (``engine_schema``): every field's JSON type, its value where a
    rule reads it (numbers, booleans, allowed sets), the lengths of texts (where a rule reads them) and lists, the
    distinct types of list elements, key types, the stripped lengths of required keys, and ``__id_key``, the
    sample id as the row-wise rule compared it (Python's repr of the value). Long texts are measured here and
    never leave the engine. ``keep``: columns of ``lines`` passed through."""
    cols = ["line_number", *keep]
    for i, f in enumerate(rubric.inputs.fields, start=1):
        t, v, n = f"t[{i}]", f"v[{i}]", f.name
        long, stripped = text_lengths(f, rubric)  # only the lengths a rule reads: each is a pass over the text
        reads_value = f.type in ("integer", "number", "boolean") or f.allowed is not None
        value = _value_sql(f, t, v) if reads_value else "NULL::VARCHAR"
        cols += [f'{value} AS "{n}"', f'{t}::{JSON_TYPE} AS "{n}__t"']
        if long:
            cols.append(f"CASE WHEN {t} = 'VARCHAR' THEN length({v})::INTEGER END AS \"{n}__len\"")
        if stripped:
            cols.append(f"CASE WHEN {t} = 'VARCHAR' THEN ({_stripped_length(v)})::INTEGER END AS \"{n}__slen\"")
        if f.type in LIST_TYPES:
            cols += [
                f"CASE WHEN {t} = 'ARRAY' THEN list_distinct(json_type({v}, '$[*]'))::{JSON_TYPE}[] END AS \"{n}__et\"",
                f"CASE WHEN {t} = 'ARRAY' THEN json_array_length({v})::INTEGER END AS \"{n}__n\"",
            ]
        if f.keys and f.type in ("object", "object_list"):
            for k, key in enumerate(f.keys):
                kp = ("$[*]" if f.type == "object_list" else "$") + _path([key])[1:]
                if f.type == "object":
                    kt, kv = f"[json_type({v}, {literal(kp)})]", f"[json_extract_string({v}, {literal(kp)})]"
                else:
                    kt, kv = f"json_type({v}, {literal(kp)})", f"json_extract_string({v}, {literal(kp)})"
                cols += [
                    f"CASE WHEN {t} IN ('OBJECT', 'ARRAY') THEN {kt}::{JSON_TYPE}[] END AS \"{n}__kt{k}\"",
                    f"CASE WHEN {t} IN ('OBJECT', 'ARRAY') THEN list_transform({kv}, x -> {_stripped_length('x')}) "
                    f'END AS "{n}__kl{k}"',
                ]
    i = next(i for i, f in enumerate(rubric.inputs.fields, 1) if f.name == rubric.inputs.id_field)
    t, v = f"t[{i}]", f"v[{i}]"
    cols.append(
        f"CASE WHEN {t} IS NULL THEN '<missing>' WHEN {t} = 'VARCHAR' THEN 's:' || {v} "
        f"ELSE 'j:' || {t} || ':' || {v} END AS __id_key"
    )
    return f"SELECT {', '.join(cols)} FROM {_parsed(rubric, lines, keep)}"


def values_sql(rubric: RubricConfig, lines: str) -> str:
    """The samples rows of valid lines (checkpoint and rubric version are the first two parameters). On a valid
    line every field is absent, null or of its declared type (the schema's type rule), so its text at the path
    is its value: null when absent or null, cast for numbers and booleans, JSON text for lists and objects.
    One parse per line (``_value_sql`` needs the JSON type too, a second parse, only to judge a line)."""
    cols = ["?::VARCHAR AS checkpoint_id", "line_number"]
    cols += [f'v[{i}]{_CASTS.get(f.type, "")} AS "{f.name}"' for i, f in enumerate(rubric.inputs.fields, 1)]
    cols.append("?::VARCHAR AS rubric_version")
    return (
        f"SELECT {', '.join(cols)} FROM (SELECT line_number, json_extract_string(j, {_paths(rubric)}) AS v "
        f"FROM {lines})"
    )
