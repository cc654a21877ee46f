"""Background threads that leave process signals to the main thread.

The kernel may deliver a signal sent to the process (Ctrl-C's SIGINT, `kill`'s SIGTERM) to
any thread that does not block it. Python runs its handler in the main thread, but when
another thread took the signal, the main thread's blocking call (a `time.sleep`, a wait)
is not interrupted: Ctrl-C then seems ignored until that call returns. Every thread the
library starts blocks those signals, so they reach the main thread and act at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["background_thread"]

# Asynchronous signals only: a fault (SIGSEGV, SIGBUS, SIGFPE) must reach the thread
# that caused it, and SIGKILL / SIGSTOP cannot be blocked.
_FOR_THE_MAIN_THREAD = tuple(
    sig
    for name in (
        "SIGINT",
        "SIGTERM",
        "SIGHUP",
        "SIGQUIT",
        "SIGUSR1",
        "SIGUSR2",
        "SIGALRM",
        "SIGCHLD",
        "SIGWINCH",
    )
    if (sig := getattr(signal, name, None)) is not None
)


def _leave_signals_to_main_thread() -> None:
    if hasattr(signal, "pthread_sigmask"):  # POSIX; elsewhere signals reach the main thread
        signal.pthread_sigmask(signal.SIG_BLOCK, _FOR_THE_MAIN_THREAD)


def background_thread(
    target: Callable[..., Any], *, name: str, args: tuple[Any, ...] = ()
) -> threading.Thread:
    """A daemon thread (not started) running `target(*args)` with the process signals
    blocked, so they go to the main thread."""

    def run() -> None:
        _leave_signals_to_main_thread()
        target(*args)

    return threading.Thread(target=run, name=name, daemon=True)
