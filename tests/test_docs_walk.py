"""Every command the README and the docs show, typed exactly as written, in a copy of the project after `make demo`,
without the Makefile's environment (#43).

A command is a line of a fenced ``bash`` block of README.md or docs/*.md (a line ending in ``\\`` goes on), or a
command in backticks in the README's table of commands. Each runs through ``bash -c`` in the project folder with a
bare environment (PATH, HOME, LANG: no EVAL_*, no DAGSTER_HOME, no NLTK_DATA) and must exit 0 (``run`` and
``backfill`` may also exit 3: the sample data fails gates on purpose, and 3 is their documented answer to that),
with no traceback and no error line. A server (``view``, ``ui``, the OpenAI-protocol stub) is started, must answer
HTTP, and must stop on SIGTERM without a traceback; it keeps running for the rest of its block, so the next line
can use it. Left out, each with its reason: the test commands themselves, lines marked ``[walk: slow]``, and a
program the machine does not have (the docs say "if you have it").
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from eval_pipeline.core.settings import STEP_LOG_SETTINGS
from eval_pipeline.devtools.net import free_port
from tests.conftest import ROOT
from tests.helpers.processes import stop
from tests.helpers.waiting import poll

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

FENCE = re.compile(r"^\s*```(\w*)")
SKIP = {
    "make test": "the suite itself",
    "make test-fast": "the suite itself",
    "make test-real": "the suite's own real-model tier",
    "make demo-llm": "minutes of a real model judging: the real-model tier runs its command on one rubric",
    "make lint": "CI runs it before the suite",
    "make bench": "the benchmarks: minutes each, run by hand",
    "make demo": "run first, as the set-up of this walk",
    "make distributed": "the distributed profile's servers: tests/distributed/test_set_up.py runs its command",
}
SERVERS = (  # (what the command contains, the port it serves on when it names none)
    ("openai_stub", 8011),
    ("make ui", 3000),
    ("eval-pipeline ui", 3000),
    ("make view", 8765),
    ("eval-pipeline view", 8765),
    ("make annotate", 8766),
    ("eval-pipeline annotate", 8766),
)
ALLOWED = {"run": {0, 3}, "backfill": {0, 3}}  # documented outcomes of evaluating data that fails gates


def documented_commands(root: Path) -> list[tuple[str, list[str]]]:
    """(where, commands) per block: each fenced bash block of README.md and docs/*.md, and the README's table."""
    blocks: list[tuple[str, list[str]]] = []
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        lines = doc.read_text(encoding="utf-8").splitlines()
        inside, lang, current, start = False, "", [], 0
        for n, line in enumerate(lines, 1):
            m = FENCE.match(line)
            if m:
                if inside and lang in ("bash", "sh", "shell") and current:
                    blocks.append((f"{doc.relative_to(root)}:{start}", current))
                inside, lang, current, start = not inside, m.group(1), [], n
                continue
            if inside and lang in ("bash", "sh", "shell") and line.strip():
                if current and current[-1].endswith("\\"):
                    current[-1] = current[-1][:-1] + " " + line.strip()
                else:
                    current.append(line.strip())
        if doc.name == "README.md":
            table = re.findall(r"^\| `((?:make|\.venv/bin/)[^`]*)`(?: / `([^`]*)`)?", "\n".join(lines), re.M)
            blocks.append(("README.md table", [c for pair in table for c in pair if c]))
    return blocks


def _skip_reason(cmd: str) -> str | None:
    bare = cmd.split("#")[0].strip()
    if bare in SKIP:
        return SKIP[bare]
    if "[walk: slow]" in cmd:
        return "marked slow in the docs"
    program = bare.split()[0] if bare else ""
    if "=" not in program and not program.startswith(".venv/") and shutil.which(program) is None:
        return f"{program} is not installed here (the docs say: if you have it)"
    return None


def _server_port(cmd: str) -> int | None:
    for needle, port in SERVERS:
        if needle in cmd:
            m = re.search(r"--port[ =](\d+)", cmd)
            return int(m.group(1)) if m else port
    return None


def _answers(port: int, seconds: float = 120) -> bool:
    status = [599]

    def answered() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                status[0] = r.status
        except urllib.error.HTTPError as exc:
            status[0] = exc.code
        except OSError:
            return False
        return True

    if poll(answered, seconds, every=0.5):
        return status[0] < 500
    return False


def _bad_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "Traceback" in ln or re.search(r"\berror\b", ln, re.I)]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A copy of the project's files as they are now (the tracked ones), sharing its .venv, after `make demo`."""
    if not (ROOT / ".venv" / "bin" / "eval-pipeline").exists():
        pytest.fail("the project's .venv is missing: run `make install` first")
    where = tmp_path_factory.mktemp("walk") / "project"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (where / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, where / rel)  # mtimes kept: make sees the shared .venv as up to date
    (where / ".venv").symlink_to(ROOT / ".venv")
    stamp = ROOT / ".venv" / ".installed"
    if stamp.exists():  # the shared .venv is this checkout's, installed: make must not install it again
        t = stamp.stat().st_mtime - 1
        os.utime(where / "pyproject.toml", (t, t))
    home = where.parent / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb"}
    for name in STEP_LOG_SETTINGS:  # the suite counts its evaluations (tests/conftest.py)
        if os.environ.get(name):
            env[name] = os.environ[name]
    done = subprocess.run(["make", "demo"], cwd=where, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (where / "demo-console.txt").write_text(done.stdout)
    # a warehouse file of an earlier version, for `migrate` (the docs' example)
    subprocess.run(
        [
            str(ROOT / ".venv/bin/python"),
            "-c",
            "import duckdb; c = duckdb.connect('data/warehouse.duckdb'); "
            "c.execute('CREATE SCHEMA legacy'); c.execute('CREATE TABLE legacy.results AS SELECT 1 AS x')",
        ],
        cwd=where,
        env=env,
        check=True,
    )
    return where, env


def test_a_new_user_after_make_demo(project, tmp_path):
    """One project, set up once (`make demo`): the verdicts the console printed are the ones the viewer's front page,
    a checkpoint page and the report's first screen show; every documented command works as typed; the folder,
    moved, keeps its lake."""
    where, env = project
    verdicts_shown_alike(where, env)
    every_documented_command_works_as_typed(where, env)
    the_project_moved_keeps_its_lake(where, env, tmp_path)


CONSOLE_RUBRIC = re.compile(r"^  (\w+)\s+([A-Z][A-Z ]*[A-Z])\s{2,}\S")


def console_verdicts(text: str) -> dict[tuple[str, str], str]:
    """(checkpoint, rubric) -> verdict, as `make demo` printed them."""
    out, ckpt = {}, ""
    for line in text.splitlines():
        head = re.match(r"^(?:\[\d+/\d+\] )?(ckpt-[\w.-]+)(?: \(.*?\))?: ", line)
        if head:
            ckpt = head.group(1)
            continue
        m = CONSOLE_RUBRIC.match(line)
        if m and ckpt:
            out[(ckpt, m.group(1))] = m.group(2).lower()
    return out


MATRIX_JS = (
    "Array.from(document.querySelectorAll('tr.verdict-row')).flatMap(r => Array.from(r.querySelectorAll("
    "'td[data-rubric]')).map(c => [r.dataset.checkpoint, c.dataset.rubric, "
    "(c.querySelector('.verdict') || {innerText: ''}).innerText.trim().toLowerCase()]))"
)


def verdicts_shown_alike(where: Path, env: dict[str, str]) -> None:
    from tests.helpers.browser import ARTIFACTS, CHROMIUM, Browser

    printed = console_verdicts((where / "demo-console.txt").read_text())
    assert len(printed) == 15, printed  # 3 checkpoints x 5 rubrics
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: 'make test' provisions it")
    port = free_port()
    viewer = subprocess.Popen(
        [".venv/bin/eval-pipeline", "view", "--port", str(port)],
        cwd=where,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    shots = ARTIFACTS.parent / "verdicts"
    browser = Browser(where.parent / "profile")
    try:
        assert _answers(port)
        browser.navigate(f"http://127.0.0.1:{port}/")
        browser.wait_for("document.querySelectorAll('tr.verdict-row').length > 0")
        browser.screenshot(shots / "viewer-front.png")
        front = {(c, r): v for c, r, v in browser.evaluate(MATRIX_JS)}
        assert front == printed
        browser.navigate(f"http://127.0.0.1:{port}/r/kg_qa/ckpt-0300")
        browser.wait_for("!!document.querySelector('#verdict .verdict')")
        browser.screenshot(shots / "viewer-checkpoint.png")
        shown = browser.evaluate("document.querySelector('#verdict .verdict').innerText.trim().toLowerCase()")
        assert shown == printed[("ckpt-0300", "kg_qa")]
        calibrated = browser.evaluate("document.querySelectorAll('tr.calibrated-row').length")
        assert calibrated and int(calibrated) >= 5  # the calibrated change beside each judged dimension's raw one
        for rubric in sorted({r for _, r in printed}):  # #48: answer_quality's compare page was a 404
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/r/{rubric}/compare?a=ckpt-0200&b=ckpt-0300") as r:
                page = r.read().decode()
            assert r.status == 200 and "tested-row" in page, rubric
        browser.navigate((where / "reports" / "report.html").as_uri())
        browser.wait_for("document.querySelectorAll('tr.verdict-row').length > 0")
        browser.screenshot(shots / "report-first-screen.png")
        report = {(c, r): v for c, r, v in browser.evaluate(MATRIX_JS)}
        assert report == printed
    finally:
        browser.close()
        stop(viewer, grace=30)


def every_documented_command_works_as_typed(where: Path, env: dict[str, str]) -> None:
    ran: list[str] = []
    skipped: list[str] = []
    failures: list[str] = []
    for place, commands in documented_commands(where):
        servers: list[tuple[str, subprocess.Popen[str], int]] = []
        try:
            for cmd in commands:
                why = _skip_reason(cmd)
                if why:
                    skipped.append(f"{place}: {cmd} ({why})")
                    continue
                port = _server_port(cmd)
                if port is not None:
                    for other in [sv for sv in servers if sv[2] == port]:  # the same server typed another way
                        _stop(other, failures)
                        servers.remove(other)
                    proc = subprocess.Popen(
                        ["bash", "-c", f"exec {cmd}" if not cmd.startswith("make") else cmd],
                        cwd=where,
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                        start_new_session=True,
                    )
                    servers.append((cmd, proc, port))
                    if not _answers(port):
                        failures.append(f"{place}: {cmd}: no HTTP answer on port {port}")
                    ran.append(cmd)
                    continue
                t0 = time.monotonic()
                done = subprocess.run(
                    ["bash", "-c", cmd], cwd=where, env=env, capture_output=True, text=True, timeout=900
                )
                print(f"{time.monotonic() - t0:6.1f}s exit {done.returncode}  {cmd}", flush=True)
                ran.append(cmd)
                verb = next((w for w in cmd.split() if w in ALLOWED), "")
                allowed = ALLOWED.get(verb, {0})
                bad = _bad_lines(done.stderr) + [ln for ln in done.stdout.splitlines() if "Traceback" in ln]
                if done.returncode not in allowed or bad:
                    failures.append(
                        f"{place}: {cmd}: exit {done.returncode}; " + " | ".join((bad or done.stderr.splitlines())[-3:])
                    )
        finally:
            for server in servers:
                _stop(server, failures)
    assert not failures, "\n".join(failures)
    assert len(ran) >= 20, ran  # the walk found the commands (a docs reshuffle that hides them fails here)
    print(f"{len(ran)} commands ran; skipped: {skipped}")


def _stop(server: tuple[str, subprocess.Popen[str], int], failures: list[str]) -> None:
    """SIGTERM to the server's process group, as a service manager or `kill` sends it: it must end, quietly."""
    cmd, proc, _ = server
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # what it started outlived it and holds its output open: not waited for
            proc.stdout.close()
            proc.wait()
            out = ""
            failures.append(f"{cmd}: left processes running that outlived it")
        failures.append(f"{cmd}: still running 30 s after SIGTERM")
    if "Traceback" in (out or ""):
        failures.append(f"{cmd}: a traceback on SIGTERM: {out[-600:]}")


def the_project_moved_keeps_its_lake(where: Path, env: dict[str, str], tmp_path: Path) -> None:
    """A project folder copied (or moved, or renamed) opens its lake from the new place: the data path is where
    the catalog is now, not where it was made."""
    moved = tmp_path / "renamed"
    shutil.copytree(where, moved, symlinks=True)
    done = subprocess.run(
        ["bash", "-c", '.venv/bin/eval-pipeline sql "SELECT count(*) AS n FROM main.verdicts" --format csv'],
        cwd=moved,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == "15"  # 3 checkpoints x 5 rubrics
    checkpoints = subprocess.run(
        ["bash", "-c", "cd /tmp && " + str(moved / ".venv/bin/eval-pipeline") + " checkpoints"],
        cwd=moved,
        env={**env, "EVAL_PROJECT_DIR": str(moved)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checkpoints.returncode == 0, checkpoints.stderr
    assert "ckpt-0300" in checkpoints.stdout and "passed" not in checkpoints.stderr
