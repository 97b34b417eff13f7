"""Provision the data files the metrics need, from packages only (nothing is downloaded at run time).

WordNet (for ALMP's synonym matching and the offline attribute extractor) comes
from Debian's ``wordnet-base`` package (WordNet 3.0 in /usr/share/wordnet). It is
copied into ``$NLTK_DATA/corpora/wordnet/`` (copied, not linked: nltk 3.10
refuses links that point outside its data root) together with the ``lexnames``
file Debian omits, which this package ships. Run by ``make provision`` (and so
by ``make demo``, ``make test`` and ``make ui``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from eval_pipeline.core.settings import REPO_ROOT, in_project, project_root

DEBIAN_WORDNET = Path("/usr/share/wordnet")
LEXNAMES = Path(__file__).resolve().parent / "package_data" / "wordnet_lexnames"


class MissingDataError(RuntimeError):
    """A data file the metrics need is not provisioned; the message says how to fix it."""


def nltk_data_dir() -> Path:
    """NLTK_DATA (relative: from the project folder), else the project's .nltk_data, else the one beside the
    installed package (a project folder that shares an environment with another)."""
    named = os.environ.get("NLTK_DATA", "").strip()
    if named:
        return in_project(named)
    own = project_root() / ".nltk_data"
    return own if own.is_dir() or project_root() == REPO_ROOT else REPO_ROOT / ".nltk_data"


def wordnet_dir() -> Path:
    return nltk_data_dir() / "corpora" / "wordnet"


def wordnet_ready() -> bool:
    d = wordnet_dir()
    return all((d / f).is_file() for f in ("data.noun", "index.adj", "lexnames", "adj.exc"))


def _install_debian_wordnet() -> None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        raise MissingDataError(
            f"WordNet 3.0 not found in {DEBIAN_WORDNET}: install Debian's package with "
            "'sudo apt-get install --no-install-recommends wordnet-base', then run 'make provision'"
        )
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "wordnet-base"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if subprocess.run(cmd, env=env).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True)
        subprocess.run(cmd, env=env, check=True)


def provision_wordnet() -> Path:
    target = wordnet_dir()
    if wordnet_ready():
        return target
    if not (DEBIAN_WORDNET / "data.noun").is_file():
        _install_debian_wordnet()
    target.mkdir(parents=True, exist_ok=True)
    for f in DEBIAN_WORDNET.iterdir():
        if f.is_file():
            shutil.copyfile(f, target / f.name)
    shutil.copyfile(LEXNAMES, target / "lexnames")
    if not wordnet_ready():
        raise MissingDataError(f"WordNet copy into {target} is incomplete")
    return target


def require_wordnet() -> Path:
    """The WordNet directory, or a clear error naming the corpus and the command that installs it."""
    if not wordnet_ready():
        raise MissingDataError(
            f"NLTK corpus 'wordnet' not found in {wordnet_dir()}: run 'make provision' "
            "(it installs Debian's wordnet-base and copies it there)"
        )
    return wordnet_dir()


def _apt_install(package: str) -> None:
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if subprocess.run(cmd, env=env).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True)
        subprocess.run(cmd, env=env, check=True)


def provision_browser() -> str | None:
    """Debian's Chromium for the UI test (headless). Installed when missing and we are root."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        _apt_install("chromium")
        return shutil.which("chromium")
    print("provision: Chromium not found; the browser test needs 'sudo apt-get install chromium'", file=sys.stderr)
    return None


def postgres_initdb() -> str | None:
    """Debian's initdb (the server binaries live outside PATH, under /usr/lib/postgresql/<v>/bin)."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return os.path.join(d, "initdb")
    return shutil.which("initdb")


def provision_postgres() -> str | None:
    """Debian's PostgreSQL server for the Postgres-backed instance test; the test starts its own server
    in a temporary folder (the package's cluster is not used). Installed when missing and we are root."""
    found = postgres_initdb()
    if found:
        return found
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        _apt_install("postgresql")
        return postgres_initdb()
    print("provision: PostgreSQL not found; the instance test needs 'sudo apt-get install postgresql'", file=sys.stderr)
    return None


def provision_redis() -> str | None:
    """Debian's Redis server for the distributed profile (the Celery broker); its tests and
    ``eval_pipeline.devtools.distributed`` start their own server. Installed when missing and we are root."""
    found = shutil.which("redis-server")
    if found:
        return found
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        _apt_install("redis-server")
        return shutil.which("redis-server")
    print(
        "provision: redis-server not found; the distributed tests need 'sudo apt-get install redis-server'",
        file=sys.stderr,
    )
    return None


def main() -> int:
    optional = {
        "--postgres": ("PostgreSQL", provision_postgres),
        "--browser": ("Chromium", provision_browser),
        "--redis": ("Redis", provision_redis),
    }
    for flag, (what, provision) in optional.items():
        if flag in sys.argv[1:]:
            try:
                path: str | None = provision()
            except subprocess.CalledProcessError as exc:
                print(f"provision: installing {what} failed: {exc}", file=sys.stderr)
                return 1
            print(f"provision: {what} {'ready at ' + path if path else 'missing'}")
            return 0
    try:
        wordnet = provision_wordnet()
    except (MissingDataError, subprocess.CalledProcessError) as exc:
        print(f"provision: {exc}", file=sys.stderr)
        return 1
    print(f"provision: WordNet 3.0 ready in {wordnet}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
