"""A harness's output folder declared for import (#75): ``<EVAL_IMPORT_DIR>/<name>/import.yaml``.

The declaration says how the folder's files become checkpoints, so that a harness run landing there is evaluated
with no command typed (the import sensor, defs/import_sensor.py, writes the checkpoint folder; the checkpoint
sensor evaluates it)::

    format: lm-eval                 # a registered format (eval-pipeline import --help lists them)
    map: ../maps/empathy.yaml       # the mapping file (relative to this file)
    files: "samples_*.jsonl*"       # which files are outputs (default: the format's own pattern)
    checkpoint: "kind-{n:03d}"      # the checkpoint id of the n-th file in time order; also {stem}, {time}
    chain: true                     # each checkpoint's parent is the previous one (default true)
    model: org/kind-7b              # only when the files do not say
    output: "{stem}.output.jsonl"   # openai-batch: each input file's output file

Files are taken in the harness's time order: the time in an lm-evaluation-harness file name, otherwise the file's
modification time; that time is the checkpoint's ``created_at``. Ids are stable: the n-th file stays the n-th as
later runs land. A file already imported unchanged is not read again (``Seen``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from eval_pipeline.core.types import JSONObject
from eval_pipeline.ingest.importers.base import IMPORTERS, ImportFailure
from eval_pipeline.ingest.importers.run import Request

DECLARATION = "import.yaml"
PATTERNS = {
    "lm-eval": "samples_*.jsonl*",
    "inspect": "*.eval",
    "promptfoo": "*.json",
    "openai-batch": "*.jsonl",
    "table": "*.csv",
}
KEYS = ("format", "map", "files", "checkpoint", "chain", "model", "output")
LM_EVAL_TIME = re.compile(r"_(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)\.jsonl(?:\.gz)?$")


@dataclass(frozen=True)
class Declaration:
    folder: Path
    format: str
    map: Path
    files: str
    checkpoint: str
    chain: bool = True
    model: str | None = None
    output: str | None = None

    @classmethod
    def load(cls, path: Path) -> Declaration:
        """``path`` (an ``import.yaml``) checked: ImportFailure naming the file and the key otherwise."""
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ImportFailure(f"{path}: cannot be read: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise ImportFailure(f"{path}: not a mapping of keys ({', '.join(KEYS)})")
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise ImportFailure(f"{path}: unknown key {unknown[0]!r} (keys: {', '.join(KEYS)})")
        fmt = str(data.get("format"))
        formats = IMPORTERS.load()
        if fmt not in formats:
            raise ImportFailure(
                f"{path}: 'format' must be one of {', '.join(sorted(formats))}, got {data.get('format')!r}"
            )
        if not isinstance(data.get("map"), str):
            raise ImportFailure(f"{path}: 'map' must name the mapping file")
        template = data.get("checkpoint", f"{path.parent.name}-{{n:03d}}")
        if not isinstance(template, str) or not any(k in template for k in ("{n", "{stem", "{time")):
            raise ImportFailure(f"{path}: 'checkpoint' must be a template with {{n}}, {{stem}} or {{time}}")
        if formats[fmt].needs_extra and not isinstance(data.get("output"), str):
            raise ImportFailure(f"{path}: {fmt} needs 'output', its output file's name, e.g. '{{stem}}.output.jsonl'")
        chain = data.get("chain", True)
        if not isinstance(chain, bool):
            raise ImportFailure(f"{path}: 'chain' must be true or false")
        return cls(
            path.parent,
            fmt,
            (path.parent / data["map"]).resolve(),
            str(data.get("files") or PATTERNS[fmt]),
            template,
            chain,
            str(data["model"]) if data.get("model") else None,
            str(data["output"]) if data.get("output") else None,
        )

    def sources(self) -> list[tuple[Path, datetime]]:
        """The folder's output files and their times, in time order (then name)."""
        found = [p for p in self.folder.glob(self.files) if p.is_file() and p.name != DECLARATION]
        if self.output:  # an output file is not an input
            outputs = {self.folder / self.output.format(stem=_stem(p)) for p in found}
            found = [p for p in found if p not in outputs]
        return sorted(((p, harness_time(p)) for p in found), key=lambda pt: (pt[1], pt[0].name))

    def requests(self) -> list[Request]:
        """One import request a file, in time order, each chained to the one before when ``chain``."""
        out: list[Request] = []
        for n, (path, when) in enumerate(self.sources(), 1):
            values: JSONObject = {"n": n, "stem": _stem(path), "time": when.strftime("%Y%m%dT%H%M%S")}
            try:
                checkpoint = self.checkpoint.format(**values)
            except (KeyError, IndexError, ValueError) as exc:
                raise ImportFailure(f"{self.folder / DECLARATION}: 'checkpoint' {self.checkpoint!r}: {exc}") from None
            extra = self.folder / self.output.format(stem=_stem(path)) if self.output else None
            out.append(
                Request(
                    self.format,
                    path,
                    self.map,
                    checkpoint,
                    extra,
                    model=self.model,
                    parent=out[-1].checkpoint if self.chain and out else None,
                    created_at=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                )
            )
        return out


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl", ".json", ".eval", ".csv", ".parquet"):
        name = name.removesuffix(suffix)
    return name


def harness_time(path: Path) -> datetime:
    """When the harness wrote ``path``: the time in an lm-evaluation-harness name (``samples_<task>_<time>``),
    otherwise the file's modification time (UTC)."""
    found = LM_EVAL_TIME.search(path.name)
    if found:
        stamp = found.group(1).split(".")[0]
        return datetime.strptime(stamp, "%Y-%m-%dT%H-%M-%S").replace(tzinfo=timezone.utc)
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)


def declarations(root: Path) -> tuple[list[Declaration], list[str]]:
    """Every ``<root>/<folder>/import.yaml`` that loads, and one line for each that does not."""
    found, refused = [], []
    for path in sorted(root.glob(f"*/{DECLARATION}")) if root.is_dir() else []:
        try:
            found.append(Declaration.load(path))
        except ImportFailure as exc:
            refused.append(str(exc))
    return found, refused
