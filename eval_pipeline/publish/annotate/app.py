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

import hashlib
import hmac
import ipaddress
import json
import math
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import pandas as pd
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from eval_pipeline.agreement import plan as item_plan
from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.contracts import Table
from eval_pipeline.core.ids import UnsafeIdentifierError, check_checkpoint_id, check_evaluator
from eval_pipeline.ingest.ratings import load_ratings
from eval_pipeline.publish.annotate import queues as q
from eval_pipeline.publish.annotate.leases import Leases
from eval_pipeline.publish.annotate.store import CannotKeep, EditedElsewhere, Rating, RatingsFile, atomic_write
from eval_pipeline.scoring.verdict import Verdict
from eval_pipeline.scoring.verdict import read as read_verdicts
from eval_pipeline.storage.warehouse import Warehouse

TEMPLATES = Path(__file__).with_name("templates")
COOKIE = "eval_annotate"
TOKEN_COOKIE = "eval_annotate_token"


class AnnotateRefused(Exception):
    """The app cannot start as asked (bound past loopback without a token)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


MIN_TOKEN = 16  # characters of EVAL_ANNOTATE_TOKEN for an address others can reach


def check_binding(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise AnnotateRefused(
            f"annotate on {host} would let anyone who reaches it write ratings: set EVAL_ANNOTATE_TOKEN (every "
            "request must then carry it), or serve on 127.0.0.1"
        )
    if not is_loopback(host) and token is not None and len(token) < MIN_TOKEN:
        raise AnnotateRefused(
            f"EVAL_ANNOTATE_TOKEN is {len(token)} character(s): at least {MIN_TOKEN} for an address others can "
            "reach (e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))')"
        )


def same(a: str, b: str) -> bool:
    """A constant-time comparison of two texts, any characters (hmac.compare_digest refuses non-ASCII str)."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def _index(value: object) -> int:
    """A checklist item's index from a form field (ASCII digits only: ``²`` is a digit to str.isdigit, not to
    int); -1 for anything else."""
    text = str(value)
    return int(text) if text.isascii() and text.isdecimal() else -1


def host_name(header: str) -> str:
    """The name of a Host header without its port (``[::1]:8766`` -> ``::1``)."""
    h = header.strip()
    if h.startswith("["):
        return h[1:].split("]", 1)[0]
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def bearer(header: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header, the scheme in any case (RFC 7235)."""
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def _secret(root: Path) -> bytes:
    """The key sessions are signed with, kept beside the ratings (sessions survive a restart)."""
    path = root / ".annotate" / "secret"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        key = secrets.token_bytes(32)
        atomic_write(path, key, mode=0o600)  # the key: for this user alone
        return path.read_bytes()


class FormRefused(Exception):
    """A posted form this app will not read: too large, or too many fields. Answered in one line, nothing written."""

    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status, self.text = status, text


MAX_FORM_FIELDS = 2000


class Form:
    """A posted URL-encoded form (this app's pages post nothing else), read without python-multipart."""

    def __init__(self, body: bytes):
        try:
            fields = parse_qs(
                body.decode("utf-8", errors="replace"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS
            )
        except ValueError:  # past max_num_fields
            raise FormRefused(
                413, f"refused: the form has more than {MAX_FORM_FIELDS} fields; nothing was written"
            ) from None
        self._fields = fields

    def get(self, name: str, default: str = "") -> str:
        values = self._fields.get(name)
        return values[-1] if values else default

    def getlist(self, name: str) -> list[str]:
        return list(self._fields.get(name, []))


MAX_FORM_BYTES = 1_000_000


async def form_of(request: Request) -> Form:
    """The posted form, read no further than ``MAX_FORM_BYTES``: a larger declared length is refused before a
    byte of the body is read, a longer stream as soon as it passes the limit (it is never held whole)."""
    too_large = FormRefused(413, f"refused: a form larger than {MAX_FORM_BYTES:,} bytes; nothing was written")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise too_large
        chunks.append(chunk)
    return Form(b"".join(chunks))


@dataclass
class Sample:
    sample_id: str
    fields: list[tuple[str, str, Any]]  # (name, description, value)
    response: str


class Workspace:
    """What the pages read: the warehouse's samples and verdicts, the ratings folder; cached per checkpoint (the
    item lists) and per version of the ratings folder (everybody's ratings)."""

    def __init__(self, warehouse: Warehouse, rubrics: dict[str, RubricConfig], root: Path):
        self.wh, self.rubrics, self.root = warehouse, rubrics, Path(root)
        self._plans: dict[tuple[str, str], item_plan.Plan] = {}
        self._ratings: dict[tuple[str, str], tuple[tuple[tuple[str, int, int], ...], pd.DataFrame]] = {}
        self._lock = threading.Lock()

    def rubric(self, name: str) -> RubricConfig:
        if name not in self.rubrics:
            raise KeyError(name)
        return self.rubrics[name]

    def checkpoints(self, rubric: str) -> list[str]:
        if not self.wh.exists():
            return []
        found = self.wh.read(
            rubric, Table.SAMPLES, columns=("checkpoint_id",), distinct=True, order_by=("checkpoint_id",)
        )
        return [str(c) for c in found.checkpoint_id]

    def plan(self, rubric: RubricConfig, ckpt: str) -> item_plan.Plan:
        key = (rubric.name, ckpt)
        with self._lock:
            if key in self._plans:
                return self._plans[key]
        plan = item_plan.load_plan(self.wh, rubric, ckpt)
        with self._lock:
            self._plans[key] = plan
        return plan

    def _folder_version(self, rubric: str) -> tuple[tuple[str, int, int], ...]:
        folder = self.root / rubric
        if not folder.is_dir():
            return ()
        return tuple(sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in folder.glob("*.csv")))

    def ratings(self, rubric: RubricConfig, ckpt: str, fresh: bool = True) -> pd.DataFrame:
        """Every evaluator's current ratings of the checkpoint, as the pipeline loads them (long form). ``fresh``
        False: the last ones read will do (after a save, where only the saver's own file changed and the caller
        reads that one itself)."""
        version = self._folder_version(rubric.name)
        key = (rubric.name, ckpt)
        with self._lock:
            hit = self._ratings.get(key)
            if hit and (hit[0] == version or not fresh):
                return hit[1]
        plan = self.plan(rubric, ckpt)
        load = load_ratings(
            rubric, ckpt, plan.ids, root=self.root, known_checkpoints=set(self.checkpoints(rubric.name))
        )
        with self._lock:
            self._ratings[key] = (version, load.ratings)
        return load.ratings

    def sample(self, rubric: RubricConfig, ckpt: str, sid: str) -> Sample | None:
        id_col = rubric.inputs.id_field
        df = self.wh.read(rubric.name, Table.SAMPLES, where={"checkpoint_id": ckpt, id_col: sid}, limit=1)
        if df.empty:
            return None
        row = df.iloc[0].to_dict()
        fields = [
            (f.name, f.description or "", row.get(f.name))
            for f in rubric.inputs.fields
            if f.name not in (id_col, rubric.inputs.response_field) and row.get(f.name) is not None
        ]
        return Sample(sid, fields, str(row.get(rubric.inputs.response_field) or ""))

    def verdict(self, rubric: str, ckpt: str) -> Verdict | None:
        try:
            found = read_verdicts(self.wh, rubric, [ckpt]) if self.wh.exists() else []
        except Exception:  # noqa: BLE001 - a warehouse being written for the first time: no verdict yet
            return None
        return found[0] if found else None


def _fmt(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "tolist"):  # an array from the warehouse: as the list it holds
        value = value.tolist()
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, indent=1, default=str)
    return str(value)


class Annotator:
    """The annotate app's state, one per app: the templates, the workspace (warehouse, rubrics, ratings folder) and
    the key that signs sessions; with what the handlers share (the session, the form's token, the page). Every
    handler takes it from ``request.app.state.annotator``."""

    def __init__(self, warehouse: Warehouse, rubrics: dict[str, RubricConfig], root: Path):
        env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
        env.filters["fmt"] = _fmt
        env.globals.update(quote=quote)
        self.env = env
        self.ws = Workspace(warehouse, rubrics, root)
        self.key = _secret(Path(root))

    def sign(self, value: str) -> str:
        return hmac.new(self.key, value.encode(), hashlib.sha256).hexdigest()[:32]

    def session(self, request: Request) -> tuple[str, str] | None:
        """(evaluator, session id) from the signed cookie."""
        raw = request.cookies.get(COOKIE, "")
        try:
            name, sid, mac = raw.split("|")
        except ValueError:
            return None
        if not same(mac, self.sign(f"{name}|{sid}")):
            return None
        return name, sid

    def csrf(self, sess: tuple[str, str]) -> str:
        return self.sign(f"csrf|{sess[0]}|{sess[1]}")

    def page(self, name: str, status: int = 200, **ctx: object) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(**ctx), status_code=status)

    def message(self, title: str, text: str, status: int) -> HTMLResponse:
        return self.page("message.html", status=status, title=title, message=text)

    def posted_ok(self, request: Request, form: Form, sess: tuple[str, str]) -> bool:
        """A state change from this app's own page: the Origin (when sent) is this host, the form token matches."""
        origin = request.headers.get("origin")
        if origin and origin.split("://", 1)[-1] != request.headers.get("host", ""):
            return False
        return same(str(form.get("csrf", "")), self.csrf(sess))

    def skipped(self, rubric: RubricConfig, ckpt: str, evaluator: str) -> set[str]:
        mine = RatingsFile(self.ws.root, rubric, ckpt, evaluator).read()
        return {sid for sid, r in mine.items() if r.skipped}

    def resolve(self, request: Request) -> tuple[RubricConfig, str]:
        rubric = self.ws.rubric(request.path_params["rubric"])
        ckpt = check_checkpoint_id(request.path_params["checkpoint"])
        return rubric, ckpt

    def entry(self, request: Request) -> tuple[tuple[str, str], RubricConfig, str] | Response:
        """The signed-in evaluator's session and the page's rubric and checkpoint, or the answer instead (sign in
        first; no such rubric or checkpoint)."""
        sess = self.session(request)
        if sess is None:
            return RedirectResponse("/login", status_code=303)
        try:
            rubric, ckpt = self.resolve(request)
        except (KeyError, UnsafeIdentifierError):
            return self.message("Not found", "no such rubric or checkpoint", 404)
        return sess, rubric, ckpt

    def handed(
        self,
        queue: q.Queue,
        evaluator: str,
        rubric: RubricConfig,
        ckpt: str,
        after: str | None = None,
        skipped: set[str] | None = None,
    ) -> str | None:
        """The item the queue hands ``evaluator`` next: the remainder's leased to them (publish.annotate.leases), so
        two people at once are handed different items."""
        if queue.kind != "remainder":
            return queue.next_item(after=after, skipped=skipped)
        return Leases(self.ws.root, rubric.name, ckpt).take(evaluator, queue.candidates(after, skipped))


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


def queue_page(request: Request) -> Response:
    a: Annotator = request.app.state.annotator
    got = a.entry(request)
    if isinstance(got, Response):
        return got
    sess, rubric, ckpt = got
    mine = RatingsFile(a.ws.root, rubric, ckpt, sess[0]).read()
    skipped = {sid for sid, r in mine.items() if r.skipped}
    plan = a.ws.plan(rubric, ckpt)
    ratings = a.ws.ratings(rubric, ckpt)
    qs = q.queues(plan, ratings, sess[0], skipped)
    spent = {queue.kind: sum(mine[s].seconds for s in queue.items if s in mine) for queue in qs}
    done = q.finished_pilot(plan, ratings) if plan.pilot else []
    return a.page(
        "queue.html",
        title=f"{rubric.name} · {ckpt}",
        evaluator=sess[0],
        rubric=rubric,
        ckpt=ckpt,
        queues=qs,
        skipped=skipped,
        spent=spent,
        budget=rubric.worklists.minutes_per_item,
        finished=done,
        verdict=a.ws.verdict(rubric.name, ckpt),
        csrf=a.csrf(sess),
    )


def item(request: Request) -> Response:
    a: Annotator = request.app.state.annotator
    got = a.entry(request)
    if isinstance(got, Response):
        return got
    sess, rubric, ckpt = got
    kind, sid = request.path_params["queue"], request.path_params["sample_id"]
    sample = a.ws.sample(rubric, ckpt, sid)
    if sample is None:
        return a.message("Not found", f"no sample {sid!r} in {rubric.name} / {ckpt}", 404)
    file = RatingsFile(a.ws.root, rubric, ckpt, sess[0])
    mine = file.read().get(sid)  # only this evaluator's own rating: the page stays blind to the others
    return a.page(
        "item.html",
        title=f"{rubric.name} · {ckpt} · {sid}",
        evaluator=sess[0],
        rubric=rubric,
        ckpt=ckpt,
        queue=kind,
        why=a.ws.plan(rubric, ckpt).why.get(sid) if kind == "remainder" else None,
        sample=sample,
        mine=mine,
        version=file.version(),
        csrf=a.csrf(sess),
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
            f"/i/{quote(rubric.name)}/{quote(ckpt)}/{quote(kind)}/{quote(sid, safe='')}?error="
            + quote("; ".join(problems)),
            status_code=303,
        )
    checklist: dict[str, list[int]] = {}
    for d in rubric.dimensions:
        ticked = [k for k in map(_index, form.getlist(f"check_{d.key}")) if 0 <= k < len(d.checklist)]
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
    queue_url = f"/q/{quote(rubric.name)}/{quote(ckpt)}"
    # the next item: the others' ratings as last read (only this evaluator's own file changed: ``mine``)
    skipped = {s for s, r in mine.items() if r.skipped}
    rated = {s for s, r in mine.items() if any(v is not None for v in r.scores.values())}
    for queue in q.queues(plan, a.ws.ratings(rubric, ckpt, fresh=False), sess[0], skipped, only=kind):
        if queue.kind == kind:
            queue.done |= rated
            nxt = a.handed(queue, sess[0], rubric, ckpt, after=sid, skipped=skipped)  # the lease of sid given back
            if nxt is not None:
                return RedirectResponse(
                    f"/i/{quote(rubric.name)}/{quote(ckpt)}/{quote(kind)}/{quote(nxt, safe='')}", status_code=303
                )
    if kind == "remainder":  # nothing handed next: this item's lease ends with its rating
        Leases(a.ws.root, rubric.name, ckpt).give_back(sess[0], sid)
    return RedirectResponse(queue_url + "?done=" + quote(kind), status_code=303)


def start(request: Request) -> Response:
    """The next item of a queue (GET: it writes no rating; the remainder's item is leased)."""
    a: Annotator = request.app.state.annotator
    got = a.entry(request)
    if isinstance(got, Response):
        return got
    sess, rubric, ckpt = got
    kind = request.path_params["queue"]
    skipped = a.skipped(rubric, ckpt, sess[0])
    for queue in q.queues(a.ws.plan(rubric, ckpt), a.ws.ratings(rubric, ckpt), sess[0], skipped):
        if queue.kind == kind:
            nxt = a.handed(queue, sess[0], rubric, ckpt, skipped=skipped)
            if nxt is None:
                break
            return RedirectResponse(f"/i/{quote(rubric.name)}/{quote(ckpt)}/{quote(kind)}/{quote(nxt, safe='')}", 303)
    return RedirectResponse(f"/q/{quote(rubric.name)}/{quote(ckpt)}?done={quote(kind)}", status_code=303)


def calibration_page(request: Request) -> Response:
    a: Annotator = request.app.state.annotator
    got = a.entry(request)
    if isinstance(got, Response):
        return got
    sess, rubric, ckpt = got
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
    return a.page(
        "calibration.html",
        title=f"Calibration · {rubric.name} · {ckpt}",
        evaluator=sess[0],
        rubric=rubric,
        ckpt=ckpt,
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
