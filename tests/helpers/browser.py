"""Debian's Chromium, headless, driven over the DevTools protocol: the browser of the UI, viewer and annotate tests."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import urllib.request
from contextlib import ExitStack
from pathlib import Path

from websockets.sync.client import connect

from eval_pipeline.devtools.net import free_port, wait_until_serving
from tests.helpers.processes import stop
from tests.helpers.waiting import poll

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--window-size=1400,1000",
]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "ui"
PAGE_TIMEOUT_S = 120.0  # how long a page may take to show what the test looks for, with the whole suite beside it


class Browser:
    """One headless Chromium driven over the DevTools protocol, for every page of the test. A page is read once
    it shows what the test looks for (or its time is up), in real time: `--dump-dom` with a virtual-time budget
    waited for the page's network to be idle, and with the suite running beside it one launch never came back
    (300 s, the test's whole limit)."""

    def __init__(self, profile: Path):
        port = free_port()
        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--remote-debugging-port={port}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until_serving(f"http://127.0.0.1:{port}/json/version", self.proc, timeout_s=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        self.closing = ExitStack()
        self.ws = self.closing.enter_context(connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30))
        self.calls = 0

    def call(self, method: str, **params: object) -> dict:
        self.calls += 1
        self.ws.send(json.dumps({"id": self.calls, "method": method, "params": params}))
        while True:  # events of domains never enabled do not come; anything else is not this call's answer
            message = json.loads(self.ws.recv(timeout=PAGE_TIMEOUT_S))
            if message.get("id") == self.calls:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def page_text(self, url: str, shot: Path, expect: tuple[str, ...]) -> str:
        """The page's text (tags, styles and scripts taken out) once it has every string of ``expect`` or its time
        is up, and its screenshot."""
        self.call("Page.navigate", url=url)
        text = ""

        def shown() -> bool:
            nonlocal text
            html = self.call("Runtime.evaluate", expression="document.documentElement.outerHTML", returnByValue=True)
            markup = html["result"].get("value") or ""  # none while the navigation replaces the document
            text = " ".join(re.sub(r"<style.*?</style>|<script.*?</script>|<[^>]+>", " ", markup, flags=re.S).split())
            return all(e in text for e in expect)

        poll(shown, PAGE_TIMEOUT_S, every=0.5)
        shot.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
        return text

    def close(self) -> None:
        self.closing.close()
        stop(self.proc, grace=30)

    def evaluate(self, expression: str) -> object:
        """A JavaScript expression's value in the page."""
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def navigate(self, url: str) -> None:
        """``url`` loaded: the new document complete (the one navigated from is marked first, so its own
        "complete" is not taken for the new page's on a loaded machine, where keys typed next would go to it)."""
        self.evaluate("window.__navigated_from = true")
        self.call("Page.navigate", url=url)
        self.wait_for("!window.__navigated_from && document.readyState === 'complete'")

    def wait_for(self, expression: str, timeout_s: float = PAGE_TIMEOUT_S) -> None:
        """Until ``expression`` is truthy in JavaScript's sense: an element found is true (by value it would come
        back as ``{}``, false in Python's, and the wait would last the whole timeout: 6 minutes a test once)."""
        if not poll(lambda: self.evaluate(f"!!({expression})"), timeout_s):
            raise TimeoutError(f"the page never had: {expression}")

    def key(self, key: str, text: str | None = None, code: str | None = None, key_code: int = 0) -> None:
        """One key pressed and released, as a keyboard sends it (``text`` for a printable key)."""
        down: dict[str, object] = {
            "type": "keyDown",
            "key": key,
            "code": code or key,
            "windowsVirtualKeyCode": key_code,
        }
        if text is not None:
            down["text"] = text
        self.call("Input.dispatchKeyEvent", **down)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code or key, windowsVirtualKeyCode=key_code)

    def type_text(self, text: str) -> None:
        for ch in text:
            self.key(ch, text=ch, key_code=ord(ch.upper()) if ch.isalnum() else 0)

    def enter(self) -> None:
        self.key("Enter", text="\r", code="Enter", key_code=13)

    def sign_in(self, base_url: str, evaluator: str) -> None:
        """Signed in to annotate at ``base_url`` as ``evaluator``, as a person does it: the name typed once the
        cursor is in the name field (autofocus lands after the document is complete; keys typed before it are lost
        on a loaded machine), then the home page showing who is rating."""
        self.navigate(base_url + "/login")
        self.wait_for("document.activeElement && document.activeElement.id === 'evaluator'")
        self.type_text(evaluator)
        self.wait_for(f"document.getElementById('evaluator').value === {json.dumps(evaluator)}")
        self.enter()
        self.wait_for("location.pathname === '/'")
        # the new page's URL commits before its document is parsed: on a loaded machine the header was not there
        # yet ("signed in as None"); wait for it, then check whom it names
        try:
            self.wait_for("document.readyState !== 'loading' && document.querySelector('header b')")
        except TimeoutError:
            pass  # said below, with what the page shows
        shown = self.evaluate("(document.querySelector('header b') || {}).innerText")
        assert shown == evaluator, f"signed in as {shown!r}, not {evaluator!r}"

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
