"""`eval-pipeline view`: a local results viewer, from the leaderboard down to one sample and its parent.

Pages (every one a stable URL; the Dagster UI links to them from asset metadata):

    /                                         the leaderboard: checkpoint x rubric
    /r/<rubric>/<checkpoint>                  per-score means with CIs against the parent, distributions,
                                              gates, agreement, quarantine
    /r/<rubric>/<checkpoint>/samples?...      the samples, paged, filtered and sorted (see SampleQuery)
    /r/<rubric>/<checkpoint>/s/<sample_id>    one sample: inputs, response, every judge, metrics, ratings,
                                              raw line, and the parent's sample beside it with a word diff

It reads the warehouse live through :mod:`.queries` (each page only what it shows); Starlette, Jinja2 and
uvicorn come with dagster-webserver; the pages load nothing from the network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from eval_pipeline.core import settings
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.config.alignment import ALIGNED_DIR
from eval_pipeline.core.ids import UnsafeIdentifierError
from eval_pipeline.core.text import csv_cell, neutralise
from eval_pipeline.core.types import Row
from eval_pipeline.publish.overview import TONE, overview
from eval_pipeline.publish.viewer import queries
from eval_pipeline.publish.viewer.queries.compare import compare_page
from eval_pipeline.publish.viewer.render import change_class, dist, input_groups, num, signed, word_diff
from eval_pipeline.rubrics import load_rubrics
from eval_pipeline.storage.backends.file import WarehouseBusy
from eval_pipeline.storage.warehouse import Warehouse

TEMPLATES = Path(__file__).with_name("templates")


def _float(v: str | None) -> float | None:
    if v is None or v.strip() == "":
        return None
    try:
        return float(v)
    except ValueError:
        return None


def sample_query(params: Any) -> queries.SampleQuery:
    page = params.get("page", "1")
    return queries.SampleQuery(
        score=params.get("score") or None,
        lo=_float(params.get("lo")),
        hi=_float(params.get("hi")),
        filter=params.get("filter") if params.get("filter") in queries.FILTERS else "all",
        q=(params.get("q") or "")[:200],
        sort=params.get("sort") or None,
        order="desc" if params.get("order") == "desc" else "asc",
        # decimal digits only ("²" is a digit, not a number), and no page past any a checkpoint can have
        page=min(int(page), 10**7) if page.isdecimal() and len(page) <= 12 else 1,
        disagree_at=_float(params.get("disagree_at")),
    )


def samples_url(rubric: str, ckpt: str, **params: object) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "", "all")})
    return f"/r/{quote(rubric)}/{quote(ckpt)}/samples" + (f"?{query}" if query else "")


def sample_url(rubric: str, ckpt: str, sample_id: str) -> str:
    return f"/r/{quote(rubric)}/{quote(ckpt)}/s/{quote(sample_id, safe='')}"


def download(request: Request) -> bool:
    return request.query_params.get("format") in ("csv", "json")


def table_response(request: Request, rows: list[Row], name: str, default: str = "") -> Response:
    """Rows as a CSV or JSON download (``?format=csv|json``)."""
    import csv
    import io
    import json

    fmt = request.query_params.get("format") or default
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)
    if fmt == "json":
        body = json.dumps(rows, default=str, ensure_ascii=False)
        media = "application/json"
    else:
        fmt = "csv"
        buf = io.StringIO()
        cols = list(rows[0]) if rows else []
        writer = csv.writer(buf)
        writer.writerow([neutralise(c) for c in cols])
        for r in rows:  # a spreadsheet opening the download runs no formula a model wrote
            writer.writerow([csv_cell(r.get(c)) for c in cols])
        body, media = buf.getvalue(), "text/csv; charset=utf-8"
    return Response(body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{safe}.{fmt}"'})


def create_app(warehouse: Warehouse, rubric_dir: str | Path | None = None) -> Starlette:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
    env.filters.update(num=num, signed=signed, dist=dist)
    env.globals.update(change_class=change_class)
    env.globals.update(samples_url=samples_url, sample_url=sample_url, quote=quote, tone=TONE)

    folder = Path(rubric_dir) if rubric_dir else settings.rubric_dir()
    loaded: dict[str, Any] = {"stamp": None, "rubrics": {}}

    def rubrics() -> dict[str, RubricConfig]:
        """The rubric configs, loaded again only when a file in the folder changed (an adopted alignment's overlay,
        aligned/<rubric>.yaml, included: it changes the judge)."""
        patterns = ("*.yaml", "*.yml", f"{ALIGNED_DIR}/*.yaml", f"{ALIGNED_DIR}/*.yml")
        files = sorted(p for pattern in patterns for p in folder.glob(pattern)) if folder.is_dir() else []
        stamp = tuple((str(p.relative_to(folder)), p.stat().st_mtime_ns) for p in files)
        if stamp != loaded["stamp"]:
            try:
                loaded["rubrics"] = {r.name: r for r in load_rubrics(folder)}
            except Exception:  # noqa: BLE001 - a broken YAML must not take the viewer down; pages fall back to tables
                loaded["rubrics"] = {}
            loaded["stamp"] = stamp
        return cast(dict[str, RubricConfig], loaded["rubrics"])

    def page(name: str, status: int = 200, **ctx: object) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(warehouse=warehouse.describe(), **ctx), status_code=status)

    def missing(what: str) -> HTMLResponse:
        return page("message.html", status=404, title="Not found", message=what)

    def leaderboard(request: Request) -> Response:
        if not warehouse.exists():
            return page("message.html", title="No results yet", message="The warehouse is empty: run `make demo`.")
        rows = queries.leaderboard(warehouse)
        if download(request):
            return table_response(request, rows, "leaderboard")
        by_rubric: dict[str, list[Row]] = {}
        for r in rows:
            by_rubric.setdefault(r["rubric"], []).append(r)
        return page("leaderboard.html", title="Leaderboard", by_rubric=by_rubric, ov=overview(warehouse))

    def verdicts(request: Request) -> Response:
        """Every stored verdict (main.verdicts) as CSV or JSON: what the front page shows."""
        ov = overview(warehouse) if warehouse.exists() else None
        rows = [v.row() for v in ov.cells.values()] if ov else []
        return table_response(request, rows, "verdicts", default="csv")

    def compare(request: Request) -> Response:
        rubric = request.path_params["rubric"]
        q = request.query_params
        a, b = q.get("a", ""), q.get("b", "")
        if not a and not b:  # no pair asked for: a checkpoint that happens to be named "compare"
            request.path_params["checkpoint"] = "compare"
            return checkpoint(request)
        try:
            data = compare_page(warehouse, rubrics().get(rubric), rubric, a, b, q.get("score"), q.get("dir", "moved"))
        except UnsafeIdentifierError:
            return missing("choose two checkpoints: /r/<rubric>/compare?a=<checkpoint>&b=<checkpoint>")
        if not data.checkpoints:
            return missing(f"no scores for rubric {rubric!r}")
        if download(request):
            table = q.get("table", "scores")
            return table_response(
                request, data.moved if table == "moved" else data.scores, f"{rubric}-{a}-vs-{b}-{table}"
            )
        return page("compare.html", title=f"{rubric} · {a} vs {b}", d=data)

    def checkpoint(request: Request) -> Response:
        rubric, ckpt = request.path_params["rubric"], request.path_params["checkpoint"]
        as_of = request.query_params.get("as_of") or None
        if as_of is not None and not as_of.isdecimal():
            return missing("as_of: give a snapshot id")
        try:
            if as_of is None:
                data = queries.checkpoint_page(warehouse, rubric, ckpt)
            else:
                with warehouse.as_of(as_of) as past:
                    data = queries.checkpoint_page(past, rubric, ckpt)
        except UnsafeIdentifierError:
            return missing(f"no rubric {rubric!r}")
        if not data.scores and not data.gates and not data.quarantine_total:
            return missing(f"no results for {rubric} / {ckpt}")
        config = rubrics().get(rubric)
        data.scores.sort(key=lambda r: (queries.rank(config, r["score"]), r["score"]))
        return page("checkpoint.html", title=f"{rubric} · {ckpt}", d=data, config=config, as_of=as_of)

    def samples(request: Request) -> Response:
        rubric, ckpt = request.path_params["rubric"], request.path_params["checkpoint"]
        sq = sample_query(request.query_params)
        try:
            data = queries.samples_page(warehouse, rubrics().get(rubric), rubric, ckpt, sq)
        except UnsafeIdentifierError:
            return missing(f"no rubric {rubric!r}")
        if not data.score_names:
            return missing(f"no scores for {rubric} / {ckpt}")

        def link(**changes: object) -> str:
            base: dict[str, object] = dict(
                score=sq.score,
                lo=sq.lo,
                hi=sq.hi,
                filter=sq.filter,
                q=sq.q,
                sort=sq.sort,
                order=sq.order if sq.sort else None,
                page=None,
            )
            base.update(changes)
            return samples_url(rubric, ckpt, **base)

        return page("samples.html", title=f"{rubric} · {ckpt} · samples", d=data, sq=sq, link=link)

    def sample(request: Request) -> Response:
        rubric, ckpt, sid = (request.path_params[k] for k in ("rubric", "checkpoint", "sample_id"))
        config = rubrics().get(rubric)
        try:
            data = queries.sample_page(warehouse, config, rubric, ckpt, sid)
        except UnsafeIdentifierError:
            return missing(f"no rubric {rubric!r}")
        if data.sample is None and data.scores is None:
            return missing(f"no sample {sid!r} in {rubric} / {ckpt}")
        response_field = config.inputs.response_field if config else "response"
        new = (data.sample or {}).get(response_field)
        old = (data.parent_sample or {}).get(response_field)
        names = queries.score_names_of(data.scores, config)
        return page(
            "sample.html",
            title=f"{rubric} · {ckpt} · {sid}",
            d=data,
            config=config,
            groups=input_groups(config, data.sample),
            response=new,
            parent_response=old,
            diff=word_diff(old, new) if data.parent_sample is not None else None,
            score_names=names,
            dimensions=[d.key for d in config.dimensions] if config else names,
            metric_columns=queries.metric_columns(data.metrics),
        )

    def table(request: Request) -> Response:
        """A table of the checkpoint page as CSV or JSON: every row the rubric's table has for the checkpoint."""
        rubric, ckpt, name = (request.path_params[k] for k in ("rubric", "checkpoint", "name"))
        try:
            rows = queries.checkpoint_table(warehouse, rubric, ckpt, name)
        except UnsafeIdentifierError:
            return missing(f"no table {name!r} in {rubric!r}")
        if rows is None:
            return missing(f"no table {name!r} in {rubric!r}")
        return table_response(request, rows, f"{rubric}-{ckpt}-{name}", default="csv")

    def alignments(request: Request) -> Response:
        """The rubric's alignments of its judge, or one with every candidate and the held-out comparison."""
        from eval_pipeline.publish.alignment import alignment_ids, alignment_view

        rubric, wanted = request.path_params["rubric"], request.path_params.get("alignment_id")
        try:
            found = alignment_ids(warehouse, rubric)
            view = alignment_view(warehouse, rubric, wanted) if wanted else None
        except UnsafeIdentifierError:
            return missing(f"no rubric {rubric!r}")
        if wanted and view is None:
            return missing(f"no alignment {wanted!r} of {rubric}")
        aligned = getattr(rubrics().get(rubric), "aligned", None)  # the judge now: its adopted alignment, if any
        adopted = aligned.id if aligned is not None else None
        return page(
            "alignment.html", title=f"{rubric} · alignments", rubric=rubric, found=found, v=view, adopted=adopted
        )

    def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    routes = [
        Route("/", leaderboard),
        Route("/healthz", health),
        Route("/verdicts", verdicts),
        Route("/align/{rubric}", alignments),
        Route("/align/{rubric}/{alignment_id}", alignments),
        Route("/r/{rubric}/compare", compare),
        Route("/r/{rubric}/{checkpoint}", checkpoint),
        Route("/r/{rubric}/{checkpoint}/table/{name}", table),
        Route("/r/{rubric}/{checkpoint}/samples", samples),
        Route("/r/{rubric}/{checkpoint}/s/{sample_id:path}", sample),
    ]

    async def busy(request: Request, exc: Exception) -> Response:
        return page("message.html", status=503, title="Warehouse busy", message=str(exc))

    async def absent(request: Request, exc: Exception) -> Response:
        return page("message.html", title="No results yet", message=str(exc))

    return Starlette(routes=routes, exception_handlers={WarehouseBusy: busy, FileNotFoundError: absent})


def serve(warehouse: Warehouse, host: str = "127.0.0.1", port: int = 8765) -> None:
    import uvicorn

    uvicorn.run(create_app(warehouse), host=host, port=port, log_level="warning")
