"""`eval-pipeline annotate`: people rate samples in the browser, by the protocol their rubric declares.

Pages (each a stable URL):

    /                                       who you are, then your queues per rubric and checkpoint
    /q/<rubric>/<checkpoint>                your queues there: progress, time against the rubric's budget, the
                                            judge's trust now and how many more ratings would settle it
    /i/<rubric>/<checkpoint>/<queue>/<id>   one item: inputs and response, each dimension with its question,
                                            anchors and checklist (or the questionnaire's statements); POST rates it
    /c/<rubric>/<checkpoint>                the pilot's calibration, once two evaluators finished it

Blind by construction: no page shows an item's judge score or another evaluator's rating of it before the
calibration view opens (which needs both pilot evaluators done). Ratings are written as the rating files the
pipeline reads (``store``), durably, before a page answers. On 127.0.0.1 nobody needs a token; bound to any other
address the app refuses to start without ``EVAL_ANNOTATE_TOKEN``, and every request must carry it (``?token=`` once,
then a cookie, or ``Authorization: Bearer``). Every state change is a POST whose origin and form token are checked;
the evaluator is fixed for a session (a signed cookie), so no one submits under another's name in it.
"""

from __future__ import annotations

import functools
import math
import secrets
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.ids import UnsafeIdentifierError, check_evaluator
from eval_pipeline.publish.annotate import queues as q
from eval_pipeline.publish.annotate.guard import (
    FormRefused,
    bearer,
    check_binding,
    form_of,
    host_name,
    index_of,
    is_loopback,
    same,
)
from eval_pipeline.publish.annotate.leases import Leases
from eval_pipeline.publish.annotate.state import COOKIE, Annotator
from eval_pipeline.publish.annotate.store import CannotKeep, EditedElsewhere, Rating, RatingsFile
from eval_pipeline.storage.warehouse import Warehouse

TOKEN_COOKIE = "eval_annotate_token"
Session = tuple[str, str]  # (evaluator, session id)
Page = Callable[[Request, Annotator, Session, RubricConfig, str], Response]


def signed_in(handler: Page) -> Callable[[Request], Response]:
    """A page of one rubric and checkpoint for the signed-in evaluator: ``handler`` is given the app's state, the
    session and the path's rubric and checkpoint. Nobody signed in is sent to sign in; an unknown rubric or
    checkpoint is not found."""

    @functools.wraps(handler)
    def page(request: Request) -> Response:
        a: Annotator = request.app.state.annotator
        got = a.entry(request)
        return got if isinstance(got, Response) else handler(request, a, *got)

    return page


def queue_url(rubric: RubricConfig, ckpt: str) -> str:
    return f"/q/{quote(rubric.name)}/{quote(ckpt)}"


def item_url(rubric: RubricConfig, ckpt: str, kind: str, sid: str) -> str:
    return f"/i/{quote(rubric.name)}/{quote(ckpt)}/{quote(kind)}/{quote(sid, safe='')}"


async def login(request: Request) -> Response:
    a: Annotator = request.app.state.annotator
    if request.method == "GET":
        return a.page("login.html", title="Who is rating?", error="")
    form = await form_of(request)
    origin = request.headers.get("origin")
    if origin and origin.split("://", 1)[-1] != request.headers.get("host", ""):
        return a.message("Refused", "a sign-in from another site", 403)
    name = str(form.get("evaluator", "")).strip()
    try:
        check_evaluator(name)
    except UnsafeIdentifierError as exc:
        return a.page("login.html", status=400, title="Who is rating?", error=str(exc))
    sid = secrets.token_hex(8)
    resp = RedirectResponse("/", status_code=303)
    resp.set_cookie(COOKIE, f"{name}|{sid}|{a.sign(f'{name}|{sid}')}", httponly=True, samesite="strict")
    return resp


async def logout(request: Request) -> Response:
    a: Annotator = request.app.state.annotator
    sess = a.session(request)
    form = await form_of(request)
    if sess is None or not a.posted_ok(request, form, sess):
        return a.message("Refused", "sign out from this app's own page", 403)
    resp = RedirectResponse("/login", status_code=303)
    resp.delete_cookie(COOKIE)
    return resp


def home(request: Request) -> Response:
    a: Annotator = request.app.state.annotator
    sess = a.session(request)
    if sess is None:
        return RedirectResponse("/login", status_code=303)
    rows = []
    for name, rubric in sorted(a.ws.rubrics.items()):
        for ckpt in a.ws.checkpoints(name):
            skipped = a.skipped(rubric, ckpt, sess[0])
            qs = q.queues(a.ws.plan(rubric, ckpt), a.ws.ratings(rubric, ckpt), sess[0], skipped)
            rows.append({"rubric": name, "checkpoint": ckpt, "queues": qs, "verdict": a.ws.verdict(name, ckpt)})
    return a.page("home.html", title="Your queues", evaluator=sess[0], rows=rows, csrf=a.csrf(sess))


@signed_in
def queue_page(request: Request, a: Annotator, sess: Session, rubric: RubricConfig, ckpt: str) -> Response:
    mine = RatingsFile(a.ws.root, rubric, ckpt, sess[0]).read()
    skipped = {sid for sid, r in mine.items() if r.skipped}
    plan = a.ws.plan(rubric, ckpt)
    ratings = a.ws.ratings(rubric, ckpt)
    qs = q.queues(plan, ratings, sess[0], skipped)
    spent = {queue.kind: sum(mine[s].seconds for s in queue.items if s in mine) for queue in qs}
    done = q.finished_pilot(plan, ratings) if plan.pilot else []
    return a.rubric_page(
        "queue.html",
        sess,
        rubric,
        ckpt,
        title=f"{rubric.name} · {ckpt}",
        queues=qs,
        skipped=skipped,
        spent=spent,
        budget=rubric.worklists.minutes_per_item,
        finished=done,
        verdict=a.ws.verdict(rubric.name, ckpt),
    )


@signed_in
def item(request: Request, a: Annotator, sess: Session, rubric: RubricConfig, ckpt: str) -> Response:
    kind, sid = request.path_params["queue"], request.path_params["sample_id"]
    sample = a.ws.sample(rubric, ckpt, sid)
    if sample is None:
        return a.message("Not found", f"no sample {sid!r} in {rubric.name} / {ckpt}", 404)
    file = RatingsFile(a.ws.root, rubric, ckpt, sess[0])
    mine = file.read().get(sid)  # only this evaluator's own rating: the page stays blind to the others
    return a.rubric_page(
        "item.html",
        sess,
        rubric,
        ckpt,
        title=f"{rubric.name} · {ckpt} · {sid}",
        queue=kind,
        why=a.ws.plan(rubric, ckpt).why.get(sid) if kind == "remainder" else None,
        sample=sample,
        mine=mine,
        version=file.version(),
        scales=rubric.rating_scales,
        error=request.query_params.get("error", ""),
    )


async def rate(request: Request) -> Response:
    a: Annotator = request.app.state.annotator
    sess = a.session(request)
    if sess is None:
        return a.message("Signed out", "sign in again: nothing was written", 403)
    form = await form_of(request)
    if not a.posted_ok(request, form, sess):
        return a.message("Refused", "a rating must come from this app's own page: nothing was written", 403)
    try:
        rubric, ckpt = a.resolve(request)
    except (KeyError, UnsafeIdentifierError):
        return a.message("Not found", "no such rubric or checkpoint", 404)
    kind, sid = request.path_params["queue"], request.path_params["sample_id"]
    plan = a.ws.plan(rubric, ckpt)
    if sid not in plan.ids:
        return a.message("Not found", f"no sample {sid!r} in {rubric.name} / {ckpt}", 404)
    action = str(form.get("action", "submit"))
    scores: dict[str, float | None] = {}
    problems = []
    for dim, scale in rubric.rating_scales.items():
        cell = str(form.get(f"score_{dim}", "")).strip()
        if not cell:
            scores[dim] = None
            continue
        try:
            value = float(cell)
        except ValueError:
            problems.append(f"{dim}: {cell!r} is not a number")
            continue
        if not value.is_integer() or not scale.min <= value <= scale.max:
            problems.append(f"{dim}: {cell} is off the scale {scale.min:g}-{scale.max:g}")
            continue
        scores[dim] = value
    if action == "submit" and not problems and all(v is None for v in scores.values()):
        problems.append("no dimension rated: rate at least one, or skip with a reason")
    reason = str(form.get("reason", "")).strip()[:500]
    if action in ("skip", "flag") and not reason:
        problems.append(f"say why you {action} this item")
    if problems:
        return RedirectResponse(
            item_url(rubric, ckpt, kind, sid) + "?error=" + quote("; ".join(problems)),
            status_code=303,
        )
    checklist: dict[str, list[int]] = {}
    for d in rubric.dimensions:
        ticked = [k for k in map(index_of, form.getlist(f"check_{d.key}")) if 0 <= k < len(d.checklist)]
        if ticked:
            checklist[d.key] = sorted(set(ticked))
    try:
        seconds = float(str(form.get("seconds", "0")) or 0)
    except ValueError:
        seconds = 0.0
    seconds = min(max(seconds, 0.0), 86400.0) if math.isfinite(seconds) else 0.0  # nan: no time, not nan time
    file = RatingsFile(a.ws.root, rubric, ckpt, sess[0])
    old = file.read().get(sid)
    rating = Rating(
        sid,
        scores if action != "skip" else dict.fromkeys(rubric.rating_scales),
        notes=str(form.get("notes", ""))[:5000],
        seconds=seconds + (old.seconds if old else 0.0),
        checklist=checklist,
        skipped=reason if action == "skip" else "",
        flagged=reason if action == "flag" else "",
    )
    try:
        mine = file.save(rating, str(form.get("version", "")) or None)
    except (EditedElsewhere, CannotKeep) as exc:
        return a.message("Not written", str(exc), 409)
    except OSError as exc:  # a full disk, a read-only folder: the page says why, nothing half-written
        why = exc.strerror or type(exc).__name__
        return a.message("Not written", f"the ratings file could not be written ({why}): nothing was saved", 507)
    # the next item: the others' ratings as last read (only this evaluator's own file changed: ``mine``)
    skipped = {s for s, r in mine.items() if r.skipped}
    rated = {s for s, r in mine.items() if any(v is not None for v in r.scores.values())}
    for queue in q.queues(plan, a.ws.ratings(rubric, ckpt, fresh=False), sess[0], skipped, only=kind):
        if queue.kind == kind:
            queue.done |= rated
            nxt = a.handed(queue, sess[0], rubric, ckpt, after=sid, skipped=skipped)  # the lease of sid given back
            if nxt is not None:
                return RedirectResponse(item_url(rubric, ckpt, kind, nxt), status_code=303)
    if kind == "remainder":  # nothing handed next: this item's lease ends with its rating
        Leases(a.ws.root, rubric.name, ckpt).give_back(sess[0], sid)
    return RedirectResponse(queue_url(rubric, ckpt) + "?done=" + quote(kind), status_code=303)


@signed_in
def start(request: Request, a: Annotator, sess: Session, rubric: RubricConfig, ckpt: str) -> Response:
    """The next item of a queue (GET: it writes no rating; the remainder's item is leased)."""
    kind = request.path_params["queue"]
    skipped = a.skipped(rubric, ckpt, sess[0])
    for queue in q.queues(a.ws.plan(rubric, ckpt), a.ws.ratings(rubric, ckpt), sess[0], skipped):
        if queue.kind == kind:
            nxt = a.handed(queue, sess[0], rubric, ckpt, skipped=skipped)
            if nxt is None:
                break
            return RedirectResponse(item_url(rubric, ckpt, kind, nxt), status_code=303)
    return RedirectResponse(queue_url(rubric, ckpt) + "?done=" + quote(kind), status_code=303)


@signed_in
def calibration_page(request: Request, a: Annotator, sess: Session, rubric: RubricConfig, ckpt: str) -> Response:
    plan = a.ws.plan(rubric, ckpt)
    ratings = a.ws.ratings(rubric, ckpt)
    cal = q.calibration(plan, ratings, ckpt)
    if cal is None:
        done = q.finished_pilot(plan, ratings)
        return a.message(
            "Not yet",
            f"the calibration opens once two evaluators have rated every pilot item (finished so far: "
            f"{', '.join(done) or 'nobody'}); until then each evaluator's ratings stay blind to the others",
            200,
        )
    return a.rubric_page(
        "calibration.html",
        sess,
        rubric,
        ckpt,
        title=f"Calibration · {rubric.name} · {ckpt}",
        cal=cal,
        verdict=a.ws.verdict(rubric.name, ckpt),
    )


def health(request: Request) -> Response:
    return PlainTextResponse("ok")


def create_app(
    warehouse: Warehouse, rubrics: dict[str, RubricConfig], root: Path, token: str | None = None
) -> Starlette:
    """The annotate app over ``warehouse``'s rubrics and the ratings under ``root``: its routes, each a handler of
    this module over one ``Annotator``; past 127.0.0.1, ``token`` is required of every request."""
    routes = [
        Route("/", home),
        Route("/healthz", health),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/q/{rubric}/{checkpoint}", queue_page),
        Route("/q/{rubric}/{checkpoint}/{queue}/next", start),
        Route("/c/{rubric}/{checkpoint}", calibration_page),
        Route("/i/{rubric}/{checkpoint}/{queue}/{sample_id:path}", item, methods=["GET"]),
        Route("/i/{rubric}/{checkpoint}/{queue}/{sample_id:path}", rate, methods=["POST"]),
    ]

    async def require_token(request: Request, call_next: RequestResponseEndpoint) -> Response:
        given = (
            request.query_params.get("token")
            or request.cookies.get(TOKEN_COOKIE)
            or bearer(request.headers.get("authorization", ""))
        )
        if request.url.path != "/healthz" and (not given or not same(given, token or "")):
            return PlainTextResponse("a token is required (EVAL_ANNOTATE_TOKEN): add ?token=...", 401)
        response: Response = await call_next(request)
        if request.query_params.get("token"):
            response.set_cookie(TOKEN_COOKIE, token or "", httponly=True, samesite="strict")
        return response

    async def require_loopback_host(request: Request, call_next: RequestResponseEndpoint) -> Response:
        """Without a token only this machine may reach the app, so only a loopback Host is answered: a page of
        another site whose name was pointed at 127.0.0.1 (DNS rebinding) sends its own name, and is refused."""
        if not is_loopback(host_name(request.headers.get("host", ""))):
            return PlainTextResponse(
                "refused: this app answers requests for 127.0.0.1 or localhost only (a request naming another host "
                "is another site's page reaching it)",
                403,
            )
        response: Response = await call_next(request)
        return response

    middleware = [
        Middleware(BaseHTTPMiddleware, dispatch=require_token if token else require_loopback_host),
    ]

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, FormRefused)
        return PlainTextResponse(exc.text, exc.status, headers={"Connection": "close"})

    app = Starlette(routes=routes, middleware=middleware, exception_handlers={FormRefused: refused})
    app.state.annotator = Annotator(warehouse, rubrics, root)
    return app


def serve(
    warehouse: Warehouse, rubrics: dict[str, RubricConfig], root: Path, host: str, port: int, token: str | None
) -> None:
    import uvicorn

    check_binding(host, token)
    uvicorn.run(create_app(warehouse, rubrics, root, token), host=host, port=port, log_level="warning")
