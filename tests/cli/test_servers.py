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

    def interrupt(signum, frame):  # a handler that raises on every signal (not `ui`'s own: a shield stands alone)
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


def test_a_stop_told_twice_at_once_raises_once_and_the_clean_up_it_began_is_not_cut_short():
    """SIGTERM to a process group reaches `make` and its child, and make sends the child SIGTERM again within
    milliseconds: the second lands wherever the first's exception is being handled, before any clean-up could shield
    itself (with a handler that raised each time, `make ui` left every server running: found by CI)."""
    raised, cleaned = 0, False
    with interrupts.stopping(raises=True) as stop:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here
        except KeyboardInterrupt:
            raised += 1
            os.kill(os.getpid(), signal.SIGTERM)  # make's, landing between the raise and the clean-up
            time.sleep(0.05)  # the handler runs between bytecodes: a second interrupt would be raised here
            cleaned = True
    assert (raised, cleaned) == (1, True)
    assert stop.requested.is_set() and not stop.again.is_set()  # one request, told twice: no hurry
    assert not interrupts.requested()  # a run's stop is its own: later work in this process is not told to stop


def test_a_second_request_later_hurries_the_clean_up():
    # Python's own SIGINT handler, as in a terminal: a suite started as a background job inherits SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with interrupts.stopping() as stop:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            assert stop.requested.is_set() and not stop.again.is_set()  # no exception: ui's loop waits on the event
            time.sleep(interrupts.Stopping.REPEAT_S)
            with interrupts.shielded(stop) as again:
                os.kill(os.getpid(), signal.SIGINT)  # a person's second Ctrl-C
                time.sleep(0.05)
                assert again.is_set()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler it found, given back
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.slow
@pytest.mark.parametrize("told", ["by a service manager, through make", "by a person, Ctrl-C twice"])
def test_the_ui_stopped_leaves_nothing_running(tmp_path, told):
    """`make ui` stopped by a service manager: SIGTERM to the process group reaches `make` and the command, and make
    sends its child SIGTERM again; a person presses Ctrl-C twice, a second apart. Either way the command ends within
    the 30 s a service manager waits, quietly, and the webserver, the daemon and their code servers are gone when it
    has ended (the clean-clone suite and CI found them left running, twice)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = dict(os.environ, DAGSTER_HOME=str(home), EVAL_WAREHOUSE=str(tmp_path / "w.duckdb"))
    port = free_port()
    cli = str(Path(sys.executable).with_name("eval-pipeline"))
    ui = [cli, "ui", "--workspace", str(ROOT / "workspace.yaml"), "--host", "127.0.0.1", "--port", str(port)]
    (tmp_path / "Makefile").write_text("ui:\n\t" + " ".join(ui) + "\n")  # the project's `make ui`, as make runs it
    make = told.endswith("make")
    cmd = ["make", "-f", str(tmp_path / "Makefile"), "ui"] if make else ui
    proc = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/server_info", proc, timeout_s=120)
        assert poll(lambda: len(processes_with(f"DAGSTER_HOME={home}")) >= 3, 60)  # both servers and the command
        if make:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            for _ in range(2):
                os.killpg(proc.pid, signal.SIGINT)  # the terminal sends Ctrl-C to the foreground group
                time.sleep(1)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode in ((2, -signal.SIGTERM) if make else (130,)), out[-2000:]  # make: "Error 130"
    if make:
        assert "ui] Error 130" in out, out[-2000:]  # the command itself ended as interrupted
    assert "Traceback" not in out, out[-2000:]
    # stopped means gone when the command has ended (not later, when an orphaned code server misses its heartbeat)
    poll(lambda: not processes_with(f"DAGSTER_HOME={home}"), 5)
    assert not processes_with(f"DAGSTER_HOME={home}")
