from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.devtools import services
from eval_pipeline.rubrics import load_rubrics

ROOT = Path(__file__).resolve().parent.parent
RUBRIC_DIR = ROOT / "rubric_configs"
SAMPLE_CHECKPOINTS = ROOT / "data" / "checkpoints"


@pytest.fixture(autouse=True)
def _fresh_endpoint_memory():
    """What judge clients learnt about an endpoint lasts the process (judge.client.learnt, the slots a server
    advertised): each test starts from the configured values, whatever an earlier test on the same worker learnt
    of a server on a reused port."""
    from eval_pipeline.judge.calls import forget_endpoints

    forget_endpoints()
    yield


# the worker's own Ctrl-C and SIGTERM handlers, as it started
_SIGNALS_AT_START = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}


@pytest.fixture(autouse=True)
def _signal_dispositions_restored():
    """Each test ends with Ctrl-C's and SIGTERM's handlers as the worker started. Dagster's in-process execution
    (``dg.materialize``) leaves SIGTERM set to SIGINT's handler when it ends: on a worker started with Ctrl-C
    ignored (a background `make test`), SIGTERM became ignored too, and every process a later test started inherited
    it (the signal tests failed only in the whole suite)."""
    yield
    for sig, handler in _SIGNALS_AT_START.items():
        if signal.getsignal(sig) != handler:
            signal.signal(sig, handler)


@pytest.fixture(scope="session")
def rubrics():
    return {r.name: r for r in load_rubrics(RUBRIC_DIR)}


@pytest.fixture
def checkpoint_root(tmp_path: Path) -> Path:
    """A private copy of the sample checkpoints."""
    root = tmp_path / "checkpoints"
    shutil.copytree(SAMPLE_CHECKPOINTS, root)
    return root


@pytest.fixture
def warehouse_path(tmp_path: Path) -> str:
    """The default warehouse, as `make demo` makes it: a DuckLake on a SQLite catalog."""
    return f"ducklake:sqlite:{tmp_path / 'lake' / 'catalog.sqlite'}"


@pytest.fixture
def file_warehouse_path(tmp_path: Path) -> str:
    """A DuckDB file: the explicit option for one process at a time."""
    return str(tmp_path / "warehouse.duckdb")


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def write_checkpoint(
    root: Path, ckpt_id: str, files: dict[str, list], manifest: dict | None = None, complete: bool = True
) -> Path:
    """Write a checkpoint folder; `files` maps rubric name -> list of rows (dict or raw str)."""
    folder = root / ckpt_id
    folder.mkdir(parents=True, exist_ok=True)
    for rubric, rows in files.items():
        lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
        (folder / f"{rubric}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if complete:
        m = manifest or {"model": "test-model", "created_at": "2026-10-01T00:00:00Z", "parent": None}
        (folder / "checkpoint.json").write_text(json.dumps(m), encoding="utf-8")
    return folder


@pytest.fixture(autouse=True)
def _isolated_outputs(tmp_path, monkeypatch):
    """Tests never write into the repository's data/ folder."""
    monkeypatch.setenv("EVAL_WORKLIST_DIR", str(tmp_path / "worklists"))
    monkeypatch.setenv("EVAL_REPORT_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("EVAL_RATINGS_DIR", str(ROOT / "data" / "human_ratings"))


@pytest.fixture
def postgres_port():
    """A PostgreSQL server of the test's own (eval_pipeline.devtools.services) with the database ``dagster``."""
    if services.postgres_tools() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed: 'make test' provisions it (apt-get install postgresql)")
        pytest.skip("PostgreSQL not installed (run 'make provision-postgres')")
    t0 = time.perf_counter()
    with services.postgres(("dagster",)) as server:
        print(f"PostgreSQL up in {time.perf_counter() - t0:.1f}s")
        yield server.port


# How `make test` spreads the suite over xdist's workers (`--dist loadscope --no-loadscope-reorder`, with the
# scheduler below): every module is one unit of work, so its module-scoped fixtures are set up once, on one worker,
# and each folder of TOGETHER is one unit, its tests sharing one server (a session fixture: one per worker). xdist's
# own groups cannot do it: pytest-xdist 3.8 marks a grouped test by rewriting `item._nodeid`, which pytest 9.2 no
# longer reads, so every marked test stayed a unit of its own. The units go out in the order of FIRST (xdist's
# default reorder, by test count, would put it aside): the real-model tier first, its worker waiting for the
# llama-server build started when the session started (pytest_configure) while the others run the rest, then judging
# while they finish (the build and the tier are the suite's longest chain); then the modules holding the longest
# tests (1-17 min each, measured with --durations), so the short ones fill in around them at the end.
TOGETHER = ("tests/real_model/", "tests/distributed/")
FIRST = (
    "tests/real_model/",
    "tests/test_docs_walk.py",
    "tests/distributed/",
    "tests/publish/test_annotate.py",
    "tests/defs/test_pipeline.py",
    "tests/defs/test_concurrent_runs.py",
    "tests/reliability/test_interruptions_and_concurrency.py",
    "tests/reliability/test_readers_never_block.py",
    "tests/defs/test_ui_browser.py",
    "tests/reliability/test_ducklake.py",
    "tests/publish/test_viewer.py",
)


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its folder when that is one of TOGETHER, else its module."""
    path = nodeid.split("::")[0]
    return next((folder for folder in TOGETHER if path.startswith(folder)), path)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        path = item.nodeid.split("::")[0]
        return next((i for i, first in enumerate(FIRST) if path.startswith(first)), len(FIRST))

    items.sort(key=rank)  # stable: the order within each module and among the others is kept


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadscope`: one unit per module, or per folder of TOGETHER (see above); other modes are xdist's."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return ByUnit(config, log)


def _named(config) -> list[str]:
    """The paths the session was given, other than the whole tests folder."""
    return [a for a in config.args if a not in ("tests", "tests/", str(ROOT / "tests"))]


def _wants_real_model(config) -> bool:
    """Whether this session runs the real-model tier: the whole suite (no paths named, or the real_model folder
    named) and no -m that leaves it out."""
    markexpr = config.option.markexpr or ""
    if "not slow" in markexpr or "not real_model" in markexpr:
        return False
    named = _named(config)
    return not named or any("real_model" in a for a in named)


# The suite counts the evaluations it pays for: every process of the session (workers, the CLI and daemons they
# start, `make demo` in the docs walk, the cluster's workers) appends a line per step that ended to one file
# (EVAL_STEP_LOG, eval_pipeline/core/progress.py); each step of `samples` is one checkpoint × rubric evaluated.
# The whole suite fails above the bound docs/testing.md states and justifies ("How many evaluations the suite
# pays for").
BOUND = re.compile(r"at most \*\*([0-9,]+)\*\* checkpoint × rubric evaluations")
WHOLE_FLOW = 15  # 3 sample checkpoints × 5 rubrics


def _whole_suite(config) -> bool:
    return not _named(config) and not config.option.markexpr and not config.option.keyword


def _tally(config) -> None:
    """In the controlling process: the session's step log, handed to every process it starts."""
    if hasattr(config, "workerinput") or os.environ.get("EVAL_STEP_LOG"):
        return
    from eval_pipeline.core import progress

    path = Path(tempfile.mkdtemp(prefix="eval-steps-")) / "steps.jsonl"
    path.touch()
    os.environ["EVAL_STEP_LOG"] = str(path)
    config.stash[STEP_LOG] = path
    progress.log_steps(str(path))


STEP_LOG = pytest.StashKey[Path]()
TALLY = pytest.StashKey["Tally"]()


class Tally:
    """The session's evaluations by the module that paid for them, docs/testing.md's bound (None: none stated), the
    CPU seconds each module's tests spent (theirs and the processes they waited for), and each worker's span (its
    first test's start, its last test's end)."""

    def __init__(
        self, by_module: dict[str, int], bound: int | None, cpu: dict[str, float], span: dict[str, tuple[float, float]]
    ) -> None:
        self.by_module, self.bound, self.cpu, self.span = by_module, bound, cpu, span
        self.evaluations = sum(by_module.values())

    def over(self, config) -> bool:
        """Above the bound (or none stated) on a run of the whole suite, where the bound applies."""
        return _whole_suite(config) and (self.bound is None or self.evaluations > self.bound)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each step log line names the test that paid for it (EVAL_STEP_CONTEXT, inherited by the processes it starts),
    the fixtures its set-up builds included (a module's fixture is paid for by its first test)."""
    if not os.environ.get("EVAL_STEP_LOG"):
        return (yield)
    os.environ["EVAL_STEP_CONTEXT"] = item.nodeid
    before, started = _cpu(), time.time()
    try:
        return (yield)
    finally:
        os.environ.pop("EVAL_STEP_CONTEXT", None)
        at_end = item.stash.get(SESSION_END_CPU, 0.0)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        when = {"worker": worker, "start": round(started, 1), "end": round(time.time(), 1)}  # the suite's timeline
        spent = [{"test": item.nodeid, "cpu": round(_cpu() - before - at_end, 2), **when}]
        if at_end:
            spent.append({"test": SESSION_END, "cpu": round(at_end, 2), **when})
        with _cpu_log(Path(os.environ["EVAL_STEP_LOG"])).open("a") as f:
            f.writelines(json.dumps(line) + "\n" for line in spent)


SESSION_END = "(each worker's last teardown: the session's servers stopped)"
SESSION_END_CPU = pytest.StashKey[float]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """The last test's teardown stops the session's fixtures, and a server's CPU of the whole session (llama-server's
    judging) is counted when it is reaped: it is told apart, not charged to whichever module happened to run last."""
    if nextitem is not None or not os.environ.get("EVAL_STEP_LOG"):
        return (yield)
    before = _cpu()
    try:
        return (yield)
    finally:
        item.stash[SESSION_END_CPU] = _cpu() - before


def _cpu_log(step_log: Path) -> Path:
    """Where each test's CPU seconds go: a file beside the step log, one JSON line a test (its worker, when it started
    and ended: which worker waited for which at the end)."""
    return step_log.with_name("cpu.jsonl")


def _cpu() -> float:
    """CPU seconds (user + system) of this process and of every process it started and waited for."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def pytest_sessionfinish(session, exitstatus):
    path = session.config.stash.get(STEP_LOG, None)
    if path is None:
        return
    by_module: dict[str, int] = {}
    for line in path.read_text().splitlines():
        step = json.loads(line)
        if step.get("asset") == "samples":
            where = str(step.get("context") or "?").split("::")[0]  # the module (a module fixture's too)
            by_module[where] = by_module.get(where, 0) + 1
    cpu: dict[str, float] = {}
    spent = _cpu_log(path)
    span: dict[str, tuple[float, float]] = {}
    for line in spent.read_text().splitlines() if spent.exists() else []:
        test = json.loads(line)
        module = test["test"].split("::")[0]
        cpu[module] = cpu.get(module, 0.0) + test["cpu"]
        first, last = span.get(test["worker"], (test["start"], test["end"]))
        span[test["worker"]] = (min(first, test["start"]), max(last, test["end"]))
    found = BOUND.search((ROOT / "docs" / "testing.md").read_text())
    tally = Tally(by_module, int(found.group(1).replace(",", "")) if found else None, cpu, span)
    session.config.stash[TALLY] = tally
    if tally.over(session.config) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    tally = config.stash.get(TALLY, None)
    if tally is None:
        return
    n, over = tally.evaluations, tally.over(config)
    line = (
        f"evaluations paid for: {n} checkpoint × rubric ({n / WHOLE_FLOW:.1f} whole flows of {WHOLE_FLOW}); "
        f"docs/testing.md's bound: {tally.bound}"
    )
    terminalreporter.write_line(("FAILED: " if over else "") + line, red=over, bold=over)
    if n >= WHOLE_FLOW:
        most = sorted(tally.by_module.items(), key=lambda kv: -kv[1])[:10]
        terminalreporter.write_line("  the most: " + ", ".join(f"{m} {k}" for m, k in most))
    if len(tally.span) > 1:  # when each worker ran out of work: the gap is what the last one made the others wait
        start = min(first for first, _ in tally.span.values())
        ended = sorted((last - start, worker) for worker, (_, last) in tally.span.items())
        terminalreporter.write_line(
            "the workers' last test ended at: "
            + ", ".join(f"{w} {int(t) // 60}:{int(t) % 60:02d}" for t, w in ended)
            + f" (idle at the end: {sum(ended[-1][0] - t for t, _ in ended):,.0f} worker-s)"
        )
    if tally.cpu:
        most_cpu = sorted(tally.cpu.items(), key=lambda kv: -kv[1])[:15]
        terminalreporter.write_line(
            f"CPU seconds of the tests: {sum(tally.cpu.values()):,.0f}; the most: "
            + ", ".join(f"{m} {c:,.0f}" for m, c in most_cpu)
        )


def pytest_configure(config):
    """The whole suite on a machine without the llama-server build: the build (~12 min on 2 cores alone) starts now,
    in the background, beside the other tests; the real-model tests, sent first to a worker of their own, wait for it
    (its file lock) and fail loudly if it failed; the session runs at a lower priority than the build. Not in
    xdist's workers, not when the session runs no real-model test, not with EVAL_LLAMA_PREBUILD=0."""
    config.addinivalue_line("markers", "real_model: against llama.cpp's server and a real model (make test)")
    _tally(config)
    if hasattr(config, "workerinput") or os.environ.get("EVAL_LLAMA_PREBUILD", "1") == "0":
        return
    from eval_pipeline.devtools import llama

    if not _wants_real_model(config) or llama.server_binary().is_file():
        return
    llama.cache_root().mkdir(parents=True, exist_ok=True)
    log = (llama.cache_root() / "prebuild.log").open("w")
    subprocess.Popen(
        [sys.executable, "-m", "eval_pipeline.devtools.llama", "build"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    # The build and the tier after it are the suite's longest chain: beside three workers and their servers the
    # build got a small share of the two cores and took over an hour (CI's tier then timed out waiting for it). The
    # session (and so every worker and what it starts) yields to it: nice 10 weighs a tenth of the build's nice 0,
    # so the build takes about what it takes alone and the rest runs in what it leaves.
    os.nice(10)


@pytest.fixture(scope="session")
def llama_server(request):
    """llama.cpp's server on a free port with the pinned model, 4 slots, one thread; stopped at the session's end.
    A build or start that fails is a test failure with its reason (never a skip), and so is a second server in one
    xdist session (the tier split over workers: see TOGETHER)."""
    from eval_pipeline.devtools import llama

    run = getattr(request.config, "workerinput", {}).get("testrunuid")
    if run:
        claim = Path(tempfile.gettempdir()) / f"eval-llama-tier-{run}"
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pytest.fail("the real-model tier was split over xdist workers (a second llama-server)", pytrace=False)

    try:
        server = llama.start(slots=4)
    except llama.BuildFailed as exc:
        pytest.fail(f"the real-model tier needs llama-server: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
