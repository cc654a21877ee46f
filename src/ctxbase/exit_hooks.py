"""Exit hooks: every open ContextBase is flushed and closed when the process ends.

Normal exit and Ctrl-C (KeyboardInterrupt) reach `atexit`. SIGTERM (what `kill`,
`docker stop` and systemd send) would end the process at once and lose the capture queue,
so while nothing else handles it, it is routed through the same exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
import weakref
from types import FrameType
from typing import Protocol

__all__ = ["EXIT_GRACE_S", "Closable", "close_all", "register", "unregister"]


class Closable(Protocol):
    """An open base (`ContextBase`): flushed and closed by `close`."""

    def close(self) -> None: ...


_open_bases: weakref.WeakSet[Closable] = weakref.WeakSet()
_atexit_lock = threading.Lock()
_atexit_registered = False
_signal_checked = False
_exit_state = {"signalled": False, "closing": False}
# After SIGTERM, how long the interpreter may take to exit (threads it waits for) before the
# open bases are closed from a watchdog thread and the signal's default action ends it.
EXIT_GRACE_S = 10.0


def close_all() -> None:
    """Close every open base. One that fails (its captured events could not all be
    written in time, say) is named on stderr, not silenced, and the next is closed."""
    _exit_state["closing"] = True
    for base in list(_open_bases):
        try:
            base.close()
        except Exception as exc:  # exiting: say so, then try the next one regardless
            project = getattr(base, "project", None)
            where = f" (project {project!r})" if isinstance(project, str) else ""
            with contextlib.suppress(Exception):  # stderr may be closed already
                print(
                    f"ctxbase: closing an open base at exit failed{where}:"
                    f" {type(exc).__name__}: {exc}",
                    file=sys.stderr,
                    flush=True,
                )


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (kill, docker stop, systemd): leave the way Ctrl-C does, through the
    interpreter's exit, so the atexit hook flushes and closes every open ContextBase.
    Raising (rather than flushing here) unwinds whatever the main thread was doing first,
    so no lock it held blocks the flush. A second signal ends the process at once."""
    if _exit_state["signalled"]:
        _die(signum)
    _exit_state["signalled"] = True
    threading.Thread(target=_watchdog, args=(signum,), name="ctxbase-exit", daemon=True).start()
    raise SystemExit(128 + signum)


def _die(signum: int) -> None:
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _watchdog(signum: int) -> None:
    # Only acts if the interpreter has not exited in time (e.g. it waits for a non-daemon
    # thread): close the bases from here, then end with SIGTERM's exit status (only the
    # main thread may restore the signal's default action, so no re-raise from here).
    time.sleep(EXIT_GRACE_S)
    if not _exit_state["closing"]:
        close_all()
        os._exit(128 + signum)


def _install_exit_hooks() -> None:
    """atexit closes every open base; SIGTERM is routed through it when nothing else
    handles the signal (an application's or a server's own handler is left alone)."""
    global _atexit_registered, _signal_checked
    with _atexit_lock:
        if not _atexit_registered:
            atexit.register(close_all)
            _atexit_registered = True
        # Handlers can only be set from the main thread: a base opened elsewhere first
        # leaves the check to the next one opened there.
        if _signal_checked or threading.current_thread() is not threading.main_thread():
            return
        _signal_checked = True
    with contextlib.suppress(ValueError, OSError):  # no signals here (embedded Python)
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _exit_on_signal)


def register(base: Closable) -> None:
    """Track an open base (closed at exit) and install the hooks once."""
    with _atexit_lock:
        _open_bases.add(base)
    _install_exit_hooks()


def unregister(base: Closable) -> None:
    with _atexit_lock:
        _open_bases.discard(base)
