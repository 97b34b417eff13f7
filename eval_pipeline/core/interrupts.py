"""Ctrl-C and SIGTERM seen wherever they land.

Dagster replaces the SIGINT and SIGTERM handlers while a run executes and raises its own error at whatever line
the main thread is on (inside an event loop's callback it is lost: "Exception ignored"); DuckDB turns it into
"Query interrupted". So a long loop of ours (the judge's calls) cannot rely on an exception reaching it. Within
``watching()`` every signal with a Python handler is also written to a wake-up pipe (whoever's handler runs), a
thread reads it, and ``requested()`` says whether Ctrl-C or SIGTERM arrived: loops check it and stop.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

_STOP = threading.Event()
_STOPPING = (signal.SIGINT, signal.SIGTERM)
# after Ctrl-C or SIGTERM, the command has this long to stop by itself; a step busy in native code (a DuckDB query,
# a validation) sees no signal until it returns, so then the process ends here: as a SIGKILL would, which a
# partition replaced in one transaction survives, and the next run marks the run failed and finishes the work
GRACE_S = 3.0
# a coroutine left unawaited within a watch is shown only if no signal is noted within this long: the signal's
# handler (Dagster's, raising at whatever line the main thread is on) may run before the thread that notes it
UNAWAITED_WAIT_S = 0.5


def requested() -> bool:
    """Whether Ctrl-C or SIGTERM arrived within ``watching()``, or was ``note``d before it (a stop noted while the
    command started is still a stop when the watch begins: a library may have swallowed its KeyboardInterrupt)."""
    return _STOP.is_set()


def note() -> None:
    """Record that Ctrl-C or SIGTERM arrived, from a handler of its own outside ``watching()`` (the command's, while
    it starts): whatever a library then turns the interrupt into, ``requested()`` says what it was."""
    _stop()


def _stop() -> None:
    """The stop is noted. From now on a coroutine the interrupt left unawaited (an HTTP client's request that was
    being created when the signal landed) is the interrupt's doing, already said in one line: not a three-line
    RuntimeWarning printed when it is collected, even after the watch ended. One collected before the stop was noted
    is ``_quiet_unawaited``'s to drop."""
    if not _STOP.is_set():
        warnings.filterwarnings("ignore", message=r"coroutine .* was never awaited", category=RuntimeWarning)
    _STOP.set()


def reset() -> None:
    """Forget a stop: the watch or the command it belonged to has ended (in-process callers run one after another)."""
    _STOP.clear()


def noted_interrupt(signum: int, frame: FrameType | None) -> None:
    """A handler for Ctrl-C and SIGTERM: noted (``requested()``), then raised as KeyboardInterrupt, so one that a
    library swallows or turns into an error of its own is still a stop."""
    note()
    raise KeyboardInterrupt


def note_from_now(ignored_too: bool = False) -> None:
    """From now on Ctrl-C and SIGTERM are ``noted_interrupt`` where nothing else took them (Python's default
    handler, the system's default; ``ignored_too``: also a signal the process started with ignored, as a script's
    background command starts with SIGINT). Main thread only: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return
    untaken = (signal.SIG_DFL, signal.default_int_handler, noted_interrupt, *((signal.SIG_IGN,) if ignored_too else ()))
    for sig in _STOPPING:
        if signal.getsignal(sig) in untaken:
            signal.signal(sig, noted_interrupt)


def is_interrupt(exc: BaseException | None) -> bool:
    """Whether an exception is a signal's doing (Python's KeyboardInterrupt, Dagster's interrupt error, or one
    raised while handling either): it may surface anywhere the signal landed, e.g. inside a socket write."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "DagsterExecutionInterruptedError":
            return True
        exc, seen = exc.__context__, seen + 1
    return False


def quiet_unraisable(
    previous: Callable[[sys.UnraisableHookArgs], object],
) -> Callable[[sys.UnraisableHookArgs], None]:
    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        # an interrupt raised inside a callback (a weakref's, an event loop's) is the interrupt, already seen
        if is_interrupt(unraisable.exc_value):
            return
        previous(unraisable)

    return hook


def _quiet_unawaited(previous: Callable[..., object]) -> Callable[..., None]:
    """``warnings.showwarning`` that drops "coroutine … was never awaited" when it is a signal's doing: the signal
    is noted within UNAWAITED_WAIT_S. Dagster's handler raises in the main thread at once, and the coroutine it left
    (an HTTP client's lock being released) is collected as its error unwinds, which can be before the watcher
    thread had its turn to note the stop (CI, #76: a three-line RuntimeWarning in an interrupted command's output).
    Every other warning, and one with no signal, is shown as before."""

    def show(message: Warning | str, category: type[Warning], *where: object, **more: object) -> None:
        unawaited = issubclass(category, RuntimeWarning) and "was never awaited" in str(message)
        if unawaited and _STOP.wait(UNAWAITED_WAIT_S):
            return
        previous(message, category, *where, **more)

    return show


def _give_up() -> None:
    """The command did not stop within GRACE_S of the signal: end the process now, in one line."""
    try:
        sys.stderr.write("eval-pipeline: interrupted (exit 130): stopped mid-step; the next run finishes the work\n")
        sys.stderr.flush()
    finally:
        os._exit(130)


@contextmanager
def watching() -> Iterator[None]:
    """Note Ctrl-C and SIGTERM for ``requested()`` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read, write = os.pipe()
    os.set_blocking(write, False)
    old_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    old_hook = sys.unraisablehook
    sys.unraisablehook = quiet_unraisable(old_hook)
    old_show = warnings.showwarning
    warnings.showwarning = _quiet_unawaited(old_show)

    deadline: list[threading.Timer] = []

    def reader() -> None:
        while data := os.read(read, 64):
            if any(sig in data for sig in _STOPPING):
                _stop()
                if not deadline:
                    deadline.append(threading.Timer(GRACE_S, _give_up))
                    deadline[0].daemon = True
                    deadline[0].start()

    thread = threading.Thread(target=reader, daemon=True, name="signal-watcher")
    thread.start()
    try:
        yield
    finally:
        for timer in deadline:  # stopped in time: what follows (the summary) is the command's own
            timer.cancel()
        signal.set_wakeup_fd(old_fd)
        sys.unraisablehook = old_hook
        warnings.showwarning = old_show
        os.close(write)  # the reader sees the end of the pipe and ends
        thread.join(timeout=1)
        os.close(read)
        reset()  # a stop belongs to this watch: later work in the same process (the next command) goes on


class Stopping:
    """Ctrl-C and SIGTERM as one request to stop, however often they come: the signal handler of a command that
    supervises processes (servers, a cluster) and must stop every one of them (``stopping()`` installs it).

    The first signal sets ``requested`` (its own; a run's ``requested()`` is not touched) and, when ``raises``,
    raises KeyboardInterrupt. A later one never raises: an exception in the middle of the clean-up the first began
    would leave what it had not stopped yet running. It sets ``again`` (the clean-up may hurry: kill rather than
    wait) unless it is the same request delivered twice: SIGTERM to a process group reaches `make` and its child,
    and make sends its child SIGTERM again within milliseconds (a repeat within REPEAT_S is that one request)."""

    REPEAT_S = 0.25

    def __init__(self, raises: bool = False) -> None:
        self.raises = raises
        self.requested = threading.Event()
        self.again = threading.Event()
        self._first_at: float | None = None

    def cleaning_up(self) -> None:
        """The clean-up has begun: from now on no signal raises, and any (but a repeat of the first) hurries it."""
        if self._first_at is None:
            self._first_at = float("-inf")

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self._first_at is None:
            self._first_at = now
            self.requested.set()
            if self.raises:
                raise KeyboardInterrupt
            return
        if now - self._first_at >= self.REPEAT_S:
            self.again.set()


@contextmanager
def _handled_by(handler: Stopping) -> Iterator[None]:
    """Ctrl-C and SIGTERM handled by ``handler`` within (main thread only: elsewhere signals cannot be handled and
    nothing changes); the handlers before restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.getsignal(sig) for sig in _STOPPING}
    for sig in _STOPPING:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, previous in before.items():
            signal.signal(sig, previous)


@contextmanager
def stopping(raises: bool = False) -> Iterator[Stopping]:
    """Within: Ctrl-C and SIGTERM are handled by one ``Stopping``. Install it before the first process is started:
    from then on no signal can land between a raise and the clean-up."""
    handler = Stopping(raises)
    with _handled_by(handler):
        yield handler


@contextmanager
def shielded(within: Stopping | None = None) -> Iterator[threading.Event]:
    """Within: Ctrl-C and SIGTERM do not interrupt. For a clean-up that must finish (servers stopped, none left
    behind): a second Ctrl-C, or the SIGTERM a service manager or `make` sends after the first, would otherwise raise
    in the middle of it and orphan what was not stopped yet. Such a signal sets the yielded event instead, so the
    clean-up may hurry (kill rather than wait). ``within``: the ``Stopping`` the command runs under (its ``again``,
    with make's repeat told apart, is the event); without one, any signal is a second one."""
    handler = within or Stopping()
    handler.cleaning_up()
    with _handled_by(handler):
        yield handler.again
