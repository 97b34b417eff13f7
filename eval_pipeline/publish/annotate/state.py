"""The annotate app's state (Annotator): its templates, its workspace and the key that signs its sessions, with what
every handler shares: the session a signed cookie carries, the form token, the page."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from eval_pipeline.core.config import RubricConfig
from eval_pipeline.core.ids import UnsafeIdentifierError, check_checkpoint_id
from eval_pipeline.publish.annotate import queues as q
from eval_pipeline.publish.annotate.guard import (
    Form,
    same,
    secret_key,
)
from eval_pipeline.publish.annotate.leases import Leases
from eval_pipeline.publish.annotate.store import RatingsFile
from eval_pipeline.publish.annotate.workspace import Workspace
from eval_pipeline.storage.warehouse import Warehouse

TEMPLATES = Path(__file__).with_name("templates")


COOKIE = "eval_annotate"


def fmt_value(value: object) -> str:
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
        env.filters["fmt"] = fmt_value
        env.globals.update(quote=quote)
        self.env = env
        self.ws = Workspace(warehouse, rubrics, root)
        self.key = secret_key(Path(root))

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

    def rubric_page(
        self, name: str, sess: tuple[str, str], rubric: RubricConfig, ckpt: str, **ctx: object
    ) -> HTMLResponse:
        """A page about one rubric and checkpoint for the signed-in evaluator (its forms carry their token)."""
        return self.page(name, 200, evaluator=sess[0], rubric=rubric, ckpt=ckpt, csrf=self.csrf(sess), **ctx)

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
