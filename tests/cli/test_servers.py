"""`eval-pipeline ui` stops what it started, however often it is told to stop."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval_pipeline.core import interrupts
from eval_pipeline.devtools.net import free_port, wait_until_serving
from tests.conftest import ROOT
from tests.helpers.processes import processes_with
from tests.helpers.waiting import poll


def test_a_signal_inside_a_shielded_clean_up_is_noted_not_raised():
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.shielded() as again:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)  # the handlers run between bytecodes: this is where an interrupt would have been raised
        assert again.is_set()
    assert signal.getsignal(signal.SIGTERM) is before


def test_servers_that_do_not_stop_on_ctrl_c_are_stopped_when_told_again_meanwhile():
    """The clean-up of `eval-pipeline ui` with servers slow to stop (here: deaf to Ctrl-C) and a second SIGTERM
    while it waits for them: every server is stopped, and the signal did not escape half-way through it."""
    import threading

    from eval_pipeline.cli.servers import stop_servers

    deaf = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"
    procs = {
        name: subprocess.Popen([sys.executable, "-c", deaf], start_new_session=True, stdout=subprocess.PIPE, text=True)
        for name in ("webserver", "daemon")
    }
    for p in procs.values():
        assert p.stdout.readline() == "up\n"  # running, Ctrl-C ignored

    def interrupt(signum, frame):  # what `ui` has installed while it runs
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    again = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))  # told again while it waits
    again.start()
    try:
        stop_servers(procs)
    except KeyboardInterrupt:
        pytest.fail("the second SIGTERM cut the clean-up short")
    finally:
        again.join()
        signal.signal(signal.SIGTERM, before)
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
                pytest.fail("a server was left running")
    assert all(p.returncode == -signal.SIGKILL for p in procs.values())


@pytest.mark.slow
def test_the_ui_stopped_twice_leaves_nothing_running(tmp_path):
    """`make ui` stopped by a service manager: SIGTERM to the group reaches `make` and the command, and make sends
    its child SIGTERM again; a person presses Ctrl-C twice. The second signal used to land in the middle of the
    clean-up and leave the webserver, the daemon and their code servers running (found by the clean-clone suite)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = dict(os.environ, DAGSTER_HOME=str(home), EVAL_WAREHOUSE=str(tmp_path / "w.duckdb"))
    port = free_port()
    cli = str(Path(sys.executable).with_name("eval-pipeline"))
    cmd = [cli, "ui", "--workspace", str(ROOT / "workspace.yaml"), "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/server_info", proc, timeout_s=120)
        assert poll(lambda: len(processes_with(f"DAGSTER_HOME={home}")) >= 3, 60)  # both servers and the command
        for _ in range(3):
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.2)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-2000:]
    assert "Traceback" not in out, out[-2000:]
    # stopped means gone when the command has ended (not later, when an orphaned code server misses its heartbeat)
    poll(lambda: not processes_with(f"DAGSTER_HOME={home}"), 5)
    assert not processes_with(f"DAGSTER_HOME={home}")
