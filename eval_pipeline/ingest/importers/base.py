"""What every importer shares: the records a format reads, the mapping from them to a rubric's inputs, and the
import's outcome (#75).

A format (one module of this package, registered in ``IMPORTERS``) reads its files into ``Record``s: each the source
line (or item) it came from, its fields as a nested mapping (what the format's docstring lists), or the reason it
cannot be used (an error line of the harness, a request without a response). A ``Mapping`` (a YAML file, validated
against the rubric like the rubric itself) says which source path becomes which rubric input field and which
gives the sample id; nothing is invented: a field the mapping names and a record lacks leaves that record out,
with its line and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from eval_pipeline.core.registry import Registry
from eval_pipeline.core.types import JSONObject

if TYPE_CHECKING:  # the rubric model (pandas) only when an import runs, not for the parser
    from eval_pipeline.core.config import RubricConfig


class ImportFailure(ValueError):
    """An import that cannot start (a bad mapping, an unreadable file): one line naming the file and the field."""


@dataclass(frozen=True)
class Record:
    line: int  # 1-based line (JSONL, CSV) or item number (a JSON array) in ``source``
    values: JSONObject = field(default_factory=dict)
    error: str | None = None  # why the record cannot be imported (then ``values`` may be partial)
    source: str = ""  # the file it came from, when a format reads several


def one_value(records: Sequence[Record], key: str) -> str | None:
    """The value at ``key`` when every usable record that has one has the same (one provider answered them all)."""
    seen = {str(r.values[key]) for r in records if r.error is None and r.values.get(key) not in (None, "")}
    return next(iter(seen)) if len(seen) == 1 else None


def model_field(path: Path, records: Sequence[Record]) -> str | None:
    """The model a format records with each record (``values["model"]``), where one model wrote them all."""
    return one_value(records, "model")


@dataclass(frozen=True)
class Format:
    """A registered format: ``read(path, extra)`` yields its records (``extra``: a second file the format needs,
    e.g. a Batch API output file); ``model(path, records)`` the model that generated them, where the files say
    (from the records read, or from a file beside ``path``)."""

    name: str
    read: Callable[[Path, Path | None], Iterator[Record]]
    help: str
    model: Callable[[Path, Sequence[Record]], str | None] = model_field
    needs_extra: str | None = None  # what the second file is, when the format needs one


IMPORTERS: Registry[Format] = Registry(
    "import format", __name__.rsplit(".", 1)[0], skip=("base", "write", "lines", "run")
)


def obj(value: Any) -> JSONObject:
    """``value`` when it is a JSON object, else an empty one (a field of the wrong kind reads as absent)."""
    return value if isinstance(value, dict) else {}


def get(path: Any, dotted: str) -> Any:
    """The value at ``dotted`` (``doc.question``, ``messages.-1.content``) in nested mappings and lists; KeyError
    when it is not there."""
    value = path
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(part)
    return value


@dataclass(frozen=True)
class JudgeSection:
    """A judge the team already ran: who (``model``, ``prompt``: its name or version, ``date``) and which source
    path holds each score (``scores``: a judged dimension's key or a questionnaire item's id -> path)."""

    model: str
    prompt: str
    date: str | None
    scores: dict[str, str]


@dataclass(frozen=True)
class Mapping:
    """Which source path becomes each rubric input field (``fields``), which gives the sample id (``id``), and,
    optionally, the scores of a judge the team already ran (``judge``)."""

    path: Path
    rubric: str
    id: str
    fields: dict[str, str]
    judge: JudgeSection | None = None

    @classmethod
    def load(
        cls, path: Path, rubrics: dict[str, RubricConfig], rubric: str | None = None
    ) -> tuple[Mapping, RubricConfig]:
        """The mapping file at ``path``, checked against its rubric (``rubric`` overrides the file's)."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ImportFailure(f"mapping {path}: cannot be read: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise ImportFailure(f"mapping {path}: not a mapping of keys (rubric, id, fields)")
        unknown = sorted(set(data) - {"rubric", "id", "fields", "judge"})
        if unknown:
            raise ImportFailure(f"mapping {path}: unknown key {unknown[0]!r} (keys: rubric, id, fields, judge)")
        name = rubric or data.get("rubric")
        if name not in rubrics:
            raise ImportFailure(f"mapping {path}: rubric {name!r} is not one of {', '.join(sorted(rubrics))}")
        config = rubrics[name]
        fields = data.get("fields")
        if not isinstance(fields, dict) or not fields:
            raise ImportFailure(f"mapping {path}: 'fields' must map the rubric's input fields to source paths")
        known = {f.name for f in config.inputs.fields}
        id_field = config.inputs.id_field
        _check_paths(f"mapping {path}", fields, known, f"an input field of rubric {name}", "doc.question")
        if id_field in fields:
            raise ImportFailure(f"mapping {path}: give the sample id as 'id', not as the field {id_field!r}")
        required = sorted(
            f.name for f in config.inputs.fields if f.required and f.name not in fields and f.name != id_field
        )
        if required:
            raise ImportFailure(f"mapping {path}: rubric {name}'s field {required[0]!r} is required and not mapped")
        source_id = data.get("id")
        if not isinstance(source_id, str) or not source_id:
            raise ImportFailure(f"mapping {path}: 'id' must name the source path that gives each sample's id")
        judge = _judge_section(path, data.get("judge"), config) if "judge" in data else None
        return cls(Path(path), name, source_id, {str(k): str(v) for k, v in fields.items()}, judge), config


def _check_paths(where: str, paths: dict[object, object], known: set[str], what: str, example: str) -> None:
    """Every key of ``paths`` one of ``known`` (``what`` they are), every value a source path (ImportFailure
    naming the file and the key otherwise)."""
    for target, source in paths.items():
        if target not in known:
            raise ImportFailure(f"{where}: {target!r} is not {what} (known: {', '.join(sorted(known))})")
        if not isinstance(source, str) or not source:
            raise ImportFailure(f"{where}: the source of {target!r} must be a path such as {example}")


def _judge_section(path: Path, data: Any, config: RubricConfig) -> JudgeSection:
    from eval_pipeline.ingest.judged import scales

    where = f"mapping {path}: judge"
    if not isinstance(data, dict):
        raise ImportFailure(f"{where}: must map model, prompt, date and scores")
    unknown = sorted(set(data) - {"model", "prompt", "date", "scores"})
    if unknown:
        raise ImportFailure(f"{where}: unknown key {unknown[0]!r} (keys: model, prompt, date, scores)")
    for key in ("model", "prompt"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ImportFailure(f"{where}: '{key}' must say who judged (the judge's {key}, as text)")
    date = data.get("date")
    if date is not None and not isinstance(date, str):
        date = str(date)  # YAML reads 2026-11-20 as a date
    scores = data.get("scores")
    if not isinstance(scores, dict) or not scores:
        raise ImportFailure(f"{where}: 'scores' must map the rubric's judged dimensions to source paths")
    what = f"a judged dimension or questionnaire item of rubric {config.name}"
    _check_paths(where, scores, set(scales(config)), what, "scores.<name>")
    return JudgeSection(
        data["model"].strip(), data["prompt"].strip(), date, {str(k): str(v) for k, v in scores.items()}
    )
