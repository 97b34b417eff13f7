"""Object storage over the S3 protocol (AWS S3, MinIO, Ceph, moto …), through DuckDB's httpfs extension.

A lake's rows on S3 (``EVAL_WAREHOUSE_DATA=s3://bucket/prefix/``), and the checkpoints and human ratings a run
reads (``EVAL_CHECKPOINT_DIR`` / ``EVAL_RATINGS_DIR`` as ``s3://`` URLs), go through here, so that machines which
share no folder see the same files.

Credentials come from the environment only, under the names every S3 tool reads: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY`` (``AWS_SESSION_TOKEN``), ``AWS_REGION`` (or ``AWS_DEFAULT_REGION``) and, for a store that
is not AWS, ``AWS_ENDPOINT_URL`` (``http://host:port``: path-style addressing, TLS as its scheme says). They
become a temporary DuckDB secret of the connection that uses them: never written to a file, a table or a log
(DuckDB shows secrets redacted). The extension is LOADed from its PyPI package (``duckdb-extension-httpfs``),
never INSTALLed.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from urllib.parse import urlsplit

import duckdb

from eval_pipeline.core import settings
from eval_pipeline.storage.extensions import extension_file
from eval_pipeline.storage.tables import literal

is_remote = settings.is_remote  # whether a location names object storage (``s3://…``) rather than a folder


def secret_sql(env: dict[str, str] | None = None) -> str:
    """``CREATE TEMPORARY SECRET`` for the S3 credentials in ``env`` (default: the process's environment)."""
    env = dict(os.environ if env is None else env)
    key, secret = env.get("AWS_ACCESS_KEY_ID", ""), env.get("AWS_SECRET_ACCESS_KEY", "")
    if not key or not secret:
        raise RuntimeError("s3:// locations need AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
    parts = [f"KEY_ID {literal(key)}", f"SECRET {literal(secret)}"]
    if env.get("AWS_SESSION_TOKEN"):
        parts.append(f"SESSION_TOKEN {literal(env['AWS_SESSION_TOKEN'])}")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    parts.append(f"REGION {literal(region)}")
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        url = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        if not url.netloc:
            raise RuntimeError(f"AWS_ENDPOINT_URL {endpoint!r} has no host (give http(s)://host:port)")
        parts += [
            f"ENDPOINT {literal(url.netloc)}",
            "URL_STYLE 'path'",
            f"USE_SSL {str(url.scheme == 'https').lower()}",
        ]
    return f"CREATE OR REPLACE TEMPORARY SECRET eval_s3 (TYPE s3, {', '.join(parts)})"


def enable(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``s3://`` readable and writable on ``con`` with the environment's credentials; a request the store does
    not answer within ``EVAL_S3_TIMEOUT`` is tried again ``EVAL_S3_RETRIES`` times, then fails the statement."""
    con.execute(f"LOAD {literal(extension_file('httpfs'))}")
    # GLOBAL: a session's SET does not reach the cursors the warehouse hands out (each a session of its own), which
    # waited out DuckDB's defaults instead. httplib: its time-outs bound every read and write of a request; through
    # curl an upload to a store that stopped answering waited 40-68 s past a 2 s time-out
    con.execute("SET GLOBAL httpfs_client_implementation = 'httplib'")
    con.execute(f"SET GLOBAL http_timeout = {settings.s3_timeout_seconds()}")
    con.execute(f"SET GLOBAL http_retries = {settings.s3_retries()}")
    con.execute(secret_sql())


# httpfs's errors for a store that does not answer, refuses the connection, or answers with a server error
_UNANSWERED = re.compile(
    r"(?P<why>Timeout was reached|Failed to read connection|Failed to write connection|"
    r"Could not establish connection|Failed to connect|Connection refused|"
    r"Server returned nothing|Failure when receiving data|Couldn't connect to server)"
    r"[^']*?HTTP (?P<verb>[A-Z]+) (?:to|on) '(?P<url>https?://[^']+)'"
)
_SERVER_ERROR = re.compile(r"HTTP (?P<verb>[A-Z]+) error on '(?P<url>https?://[^']+)' \(HTTP (?P<status>5\d\d)\)")


def unanswered_hint(message: str) -> str | None:
    """The one line to say when the object store failed a request (no answer in time, no connection, a server
    error) instead of httpfs's error; None for any other error. The statement that met it was not committed."""
    m = _UNANSWERED.search(message) or _SERVER_ERROR.search(message)
    if not m:
        return None
    url = urlsplit(m.group("url"))
    if "status" in m.groupdict():
        what = f"answered HTTP {m.group('status')}"
    elif m.group("why") in ("Timeout was reached", "Failed to read connection", "Failed to write connection"):
        retries = settings.s3_retries()
        tried = f"{retries} {'retry' if retries == 1 else 'retries'}"
        what = f"did not answer within {settings.s3_timeout_seconds()} s, {tried}"
    else:
        what = "could not be reached"
    return (
        f"the object store {url.scheme}://{url.netloc} {what} ({m.group('verb')} {url.path.lstrip('/')}): the step "
        "stopped and committed nothing (the lake keeps its last snapshot); run again when the store answers"
    )


def connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        enable(con)
    except BaseException:
        con.close()
        raise
    return con


def _prefix(url: str) -> str:
    return url.rstrip("/") + "/"


def list_files(url: str) -> list[str]:
    """Every object below the ``s3://`` folder ``url``, as paths relative to it, sorted."""
    prefix = _prefix(url)
    with connection() as con:
        rows = con.execute("SELECT file FROM glob(?)", [prefix + "**"]).fetchall()
    return sorted(f[len(prefix) :] for (f,) in rows if f.startswith(prefix))


def mirror(url: str, dest: Path) -> list[Path]:
    """Make the local folder ``dest`` a copy of the ``s3://`` folder ``url``: objects new or changed (size, time)
    since the last mirror are downloaded, local files no longer in the store are removed. Returns the local
    files. A file is replaced whole (written beside, then renamed): a reader never sees half of one."""
    prefix = _prefix(url)
    out: list[Path] = []
    dest.mkdir(parents=True, exist_ok=True)
    with connection() as con:
        # the listing reads no content (projection pushdown): only what changed is downloaded below
        listed = con.execute(
            "SELECT filename, size, epoch(last_modified) FROM read_blob(?)", [prefix + "**"]
        ).fetchall()
        for name, size, modified in sorted(listed):
            rel = name[len(prefix) :] if name.startswith(prefix) else ""
            if not rel or rel.endswith("/") or ".." in Path(rel).parts or Path(rel).name.startswith("."):
                continue
            target = dest / rel
            out.append(target)
            if target.is_file():
                st = target.stat()
                if st.st_size == size and int(st.st_mtime) == int(modified):
                    continue
            row = con.execute("SELECT content FROM read_blob(?)", [name]).fetchone()
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.part")
            tmp.write_bytes(bytes(row[0]) if row and row[0] is not None else b"")
            os.utime(tmp, (modified, modified))
            os.replace(tmp, target)
    keep = set(out)
    for path in sorted(dest.rglob("*"), reverse=True):
        if path.is_file() and path not in keep:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    return out


def upload(local: Path, url: str) -> None:
    """The local text file ``local`` written whole to the object ``url`` (replaced whole or not at all), ending in
    one newline."""
    with connection() as con:
        # through COPY: one VARCHAR column, no header, no quoting; the row's own newline ends the file
        con.execute(
            "COPY (SELECT CASE WHEN ends_with(content, chr(10)) THEN content[:-2] ELSE content END "
            f"FROM read_text({literal(str(local))})) TO {literal(url)} "
            "(FORMAT csv, HEADER false, QUOTE '', ESCAPE '', DELIMITER '\x01')"
        )


def join(url: str, *parts: str) -> str:
    """``url`` with ``parts`` appended as path segments."""
    return posixpath.join(_prefix(url), *parts)
