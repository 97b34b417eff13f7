"""The import sensor: a harness's run landing in a declared output folder (EVAL_IMPORT_DIR/<name>/import.yaml,
ingest.importers.folder) becomes a checkpoint folder, which the checkpoint sensor then evaluates (#75).

A file is imported once it has stayed the same size and time for one tick (a harness still writing it is left for
the next), and not again while it, its mapping and its declaration stay so (the cursor keeps their signature). What
an import leaves out is written beside the files (``import-report-<checkpoint>.jsonl``); an import that fails is
logged in one line and tried again when its file, mapping or declaration changes (a mended mapping imports it)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from eval_pipeline.core import settings

DONE, SEEN = "done", "seen"


def _signature(*paths: Path | None) -> str:
    """The files' sizes and times (a file gone: "-"): what a file's import depends on, its mapping and declaration
    included, so that mending a mapping imports again what it refused."""
    out = []
    for path in paths:
        try:
            st = path.stat() if path is not None else None
        except OSError:
            st = None
        out.append(f"{st.st_size}:{st.st_mtime_ns}" if st is not None else "-")
    return "|".join(out)


def build_import_sensor(
    import_root: str | Path | None = None, checkpoint_root: str | Path | None = None, minimum_interval_seconds: int = 15
) -> dg.SensorDefinition:
    @dg.sensor(
        name="import_sensor",
        description="Writes each harness run that lands in a declared output folder (EVAL_IMPORT_DIR/<name>/"
        "import.yaml) as a checkpoint folder; the checkpoint sensor evaluates it.",
        minimum_interval_seconds=settings.sensor_interval_seconds(minimum_interval_seconds),
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def import_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        from eval_pipeline.ingest.checkpoints import CheckpointError
        from eval_pipeline.ingest.importers import ImportFailure, import_file
        from eval_pipeline.ingest.importers.folder import DECLARATION, declarations
        from eval_pipeline.rubrics import load_rubrics

        root = Path(import_root) if import_root else settings.import_dir()
        if not root.is_dir():
            return dg.SkipReason(f"no import folder ({root}): nothing declared")
        where = str(checkpoint_root or settings.checkpoint_location())
        if "://" in where:
            return dg.SkipReason(f"imports write checkpoint folders on this machine; {where} is not: import there")
        target = Path(where)
        cursor = json.loads(context.cursor) if context.cursor else {DONE: {}, SEEN: {}}
        done: dict[str, str] = cursor[DONE]
        seen: dict[str, str] = {}
        found, refused = declarations(root)
        for line in refused:
            context.log.warning(f"import declaration refused: {line}")
        rubrics = None
        imported, waiting = [], 0
        for decl in found:
            try:
                requests = decl.requests()
            except ImportFailure as exc:
                context.log.warning(str(exc))
                continue
            for req in requests:
                key = str(req.source)
                sig = _signature(req.source, req.extra, req.mapping, decl.folder / DECLARATION)
                if done.get(key) == sig:
                    continue
                if cursor[SEEN].get(key) != sig:  # new or still changing: taken once it has stayed the same
                    seen[key] = sig
                    waiting += 1
                    continue
                rubrics = rubrics or {r.name: r for r in load_rubrics()}
                done[key] = sig
                try:
                    out = import_file(req, rubrics, target)
                except (ImportFailure, CheckpointError) as exc:
                    context.log.warning(f"import of {req.source} refused: {exc}")
                    continue
                if out.left_out:
                    report = decl.folder / f"import-report-{req.checkpoint}.jsonl"
                    report.write_text("".join(json.dumps(r) + "\n" for r in out.left_out), encoding="utf-8")
                    context.log.warning(f"{req.source.name}: {len(out.left_out)} record(s) left out: {report}")
                if not out.unchanged:
                    imported.append(req.checkpoint)
                    context.log.info(f"{req.source.name} -> checkpoint {req.checkpoint} ({out.imported} samples)")
        new_cursor = json.dumps({DONE: done, SEEN: seen}, sort_keys=True)
        if not imported:
            return dg.SensorResult(
                skip_reason=dg.SkipReason(
                    f"nothing imported ({len(found)} declared folder(s), {waiting} file(s) waiting to settle)"
                ),
                cursor=new_cursor,
            )
        return dg.SensorResult(cursor=new_cursor)

    return import_sensor
