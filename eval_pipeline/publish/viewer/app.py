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
from typing import Any
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


class Viewer:
    """The viewer's state, one per app: the templates, the warehouse it reads, and the rubric configs (loaded again
    only when a file in their folder changed). Every handler takes it from ``request.app.state.viewer``."""

    def __init__(self, warehouse: Warehouse, rubric_dir: str | Path | None = None):
        env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
        env.filters.update(num=num, signed=signed, dist=dist)
        env.globals.update(change_class=change_class)
        env.globals.update(samples_url=samples_url, sample_url=sample_url, quote=quote, tone=TONE)
        self.env, self.warehouse = env, warehouse
        self.folder = Path(rubric_dir) if rubric_dir else settings.rubric_dir()
        self._stamp: tuple[tuple[str, int], ...] | None = None
        self._rubrics: dict[str, RubricConfig] = {}

    def rubrics(self) -> dict[str, RubricConfig]:
        """The rubric configs, loaded again only when a file in the folder changed (an adopted alignment's overlay,
        aligned/<rubric>.yaml, included: it changes the judge)."""
        folder = self.folder
        patterns = ("*.yaml", "*.yml", f"{ALIGNED_DIR}/*.yaml", f"{ALIGNED_DIR}/*.yml")
        files = sorted(p for pattern in patterns for p in folder.glob(pattern)) if folder.is_dir() else []
        stamp = tuple((str(p.relative_to(folder)), p.stat().st_mtime_ns) for p in files)
        if stamp != self._stamp:
            try:
                self._rubrics = {r.name: r for r in load_rubrics(folder)}
            except Exception:  # noqa: BLE001 - a broken YAML must not take the viewer down; pages fall back to tables
                self._rubrics = {}
            self._stamp = stamp
        return self._rubrics

    def page(self, name: str, status: int = 200, **ctx: object) -> HTMLResponse:
        html = self.env.get_template(name).render(warehouse=self.warehouse.describe(), **ctx)
        return HTMLResponse(html, status_code=status)

    def missing(self, what: str) -> HTMLResponse:
        return self.page("message.html", status=404, title="Not found", message=what)


def leaderboard(request: Request) -> Response:
    v: Viewer = request.app.state.viewer
    if not v.warehouse.exists():
        return v.page("message.html", title="No results yet", message="The warehouse is empty: run `make demo`.")
    rows = queries.leaderboard(v.warehouse)
    if download(request):
        return table_response(request, rows, "leaderboard")
    by_rubric: dict[str, list[Row]] = {}
    for r in rows:
        by_rubric.setdefault(r["rubric"], []).append(r)
    return v.page("leaderboard.html", title="Leaderboard", by_rubric=by_rubric, ov=overview(v.warehouse))


def verdicts(request: Request) -> Response:
    """Every stored verdict (main.verdicts) as CSV or JSON: what the front page shows."""
    v: Viewer = request.app.state.viewer
    ov = overview(v.warehouse) if v.warehouse.exists() else None
    rows = [v.row() for v in ov.cells.values()] if ov else []
    return table_response(request, rows, "verdicts", default="csv")


def compare(request: Request) -> Response:
    v: Viewer = request.app.state.viewer
    rubric = request.path_params["rubric"]
    q = request.query_params
    a, b = q.get("a", ""), q.get("b", "")
    if not a and not b:  # no pair asked for: a checkpoint that happens to be named "compare"
        request.path_params["checkpoint"] = "compare"
        return checkpoint(request)
    try:
        data = compare_page(v.warehouse, v.rubrics().get(rubric), rubric, a, b, q.get("score"), q.get("dir", "moved"))
    except UnsafeIdentifierError:
        return v.missing("choose two checkpoints: /r/<rubric>/compare?a=<checkpoint>&b=<checkpoint>")
    if not data.checkpoints:
        return v.missing(f"no scores for rubric {rubric!r}")
    if download(request):
        table = q.get("table", "scores")
        return table_response(request, data.moved if table == "moved" else data.scores, f"{rubric}-{a}-vs-{b}-{table}")
    return v.page("compare.html", title=f"{rubric} · {a} vs {b}", d=data)


def checkpoint(request: Request) -> Response:
    v: Viewer = request.app.state.viewer
    rubric, ckpt = request.path_params["rubric"], request.path_params["checkpoint"]
    as_of = request.query_params.get("as_of") or None
    if as_of is not None and not as_of.isdecimal():
        return v.missing("as_of: give a snapshot id")
    try:
        if as_of is None:
            data = queries.checkpoint_page(v.warehouse, rubric, ckpt)
        else:
            with v.warehouse.as_of(as_of) as past:
                data = queries.checkpoint_page(past, rubric, ckpt)
    except UnsafeIdentifierError:
        return v.missing(f"no rubric {rubric!r}")
    if not data.scores and not data.gates and not data.quarantine_total:
        return v.missing(f"no results for {rubric} / {ckpt}")
    config = v.rubrics().get(rubric)
    data.scores.sort(key=lambda r: (queries.rank(config, r["score"]), r["score"]))
    return v.page("checkpoint.html", title=f"{rubric} · {ckpt}", d=data, config=config, as_of=as_of)


def samples(request: Request) -> Response:
    v: Viewer = request.app.state.viewer
    rubric, ckpt = request.path_params["rubric"], request.path_params["checkpoint"]
    sq = sample_query(request.query_params)
    try:
        data = queries.samples_page(v.warehouse, v.rubrics().get(rubric), rubric, ckpt, sq)
    except UnsafeIdentifierError:
        return v.missing(f"no rubric {rubric!r}")
    if not data.score_names:
        return v.missing(f"no scores for {rubric} / {ckpt}")

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

    return v.page("samples.html", title=f"{rubric} · {ckpt} · samples", d=data, sq=sq, link=link)


def sample(request: Request) -> Response:
    v: Viewer = request.app.state.viewer
    rubric, ckpt, sid = (request.path_params[k] for k in ("rubric", "checkpoint", "sample_id"))
    config = v.rubrics().get(rubric)
    try:
        data = queries.sample_page(v.warehouse, config, rubric, ckpt, sid)
    except UnsafeIdentifierError:
        return v.missing(f"no rubric {rubric!r}")
    if data.sample is None and data.scores is None:
        return v.missing(f"no sample {sid!r} in {rubric} / {ckpt}")
    response_field = config.inputs.response_field if config else "response"
    new = (data.sample or {}).get(response_field)
    old = (data.parent_sample or {}).get(response_field)
    names = queries.score_names_of(data.scores, config)
    return v.page(
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
    v: Viewer = request.app.state.viewer
    rubric, ckpt, name = (request.path_params[k] for k in ("rubric", "checkpoint", "name"))
    try:
        rows = queries.checkpoint_table(v.warehouse, rubric, ckpt, name)
    except UnsafeIdentifierError:
        return v.missing(f"no table {name!r} in {rubric!r}")
    if rows is None:
        return v.missing(f"no table {name!r} in {rubric!r}")
    return table_response(request, rows, f"{rubric}-{ckpt}-{name}", default="csv")


def alignments(request: Request) -> Response:
    """The rubric's alignments of its judge, or one with every candidate and the held-out comparison."""
    v: Viewer = request.app.state.viewer
    from eval_pipeline.publish.alignment import alignment_ids, alignment_view

    rubric, wanted = request.path_params["rubric"], request.path_params.get("alignment_id")
    try:
        found = alignment_ids(v.warehouse, rubric)
        view = alignment_view(v.warehouse, rubric, wanted) if wanted else None
    except UnsafeIdentifierError:
        return v.missing(f"no rubric {rubric!r}")
    if wanted and view is None:
        return v.missing(f"no alignment {wanted!r} of {rubric}")
    aligned = getattr(v.rubrics().get(rubric), "aligned", None)  # the judge now: its adopted alignment, if any
    adopted = aligned.id if aligned is not None else None
    return v.page("alignment.html", title=f"{rubric} · alignments", rubric=rubric, found=found, v=view, adopted=adopted)


def health(request: Request) -> Response:
    return PlainTextResponse("ok")


def create_app(warehouse: Warehouse, rubric_dir: str | Path | None = None) -> Starlette:
    """The viewer over ``warehouse``: its routes, each a handler of this module, over one ``Viewer``."""
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
        v: Viewer = request.app.state.viewer
        return v.page("message.html", status=503, title="Warehouse busy", message=str(exc))

    async def absent(request: Request, exc: Exception) -> Response:
        v: Viewer = request.app.state.viewer
        return v.page("message.html", title="No results yet", message=str(exc))

    app = Starlette(routes=routes, exception_handlers={WarehouseBusy: busy, FileNotFoundError: absent})
    app.state.viewer = Viewer(warehouse, rubric_dir)
    return app


def serve(warehouse: Warehouse, host: str = "127.0.0.1", port: int = 8765) -> None:
    import uvicorn

    uvicorn.run(create_app(warehouse), host=host, port=port, log_level="warning")
