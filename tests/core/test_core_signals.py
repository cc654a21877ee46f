"""Signals reach the main thread: every thread the library starts blocks them.

The kernel hands a process-wide signal (Ctrl-C's SIGINT, `kill`'s SIGTERM) to any thread
that does not block it; Python then runs the handler in the main thread but does not
interrupt the main thread's sleep or wait, so Ctrl-C seemed ignored now and then.
"""

from __future__ import annotations

import signal
import sys
import threading
import weakref
from pathlib import Path

import pytest

import ctxbase

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads signal masks from /proc (Linux)"
)


def _blocked(native_id: int | None) -> set[int] | None:
    """The signals a thread of this process blocks (None when it has ended)."""
    try:
        status = Path(f"/proc/self/task/{native_id}/status").read_text()
    except FileNotFoundError:
        return None
    mask = int(next(ln for ln in status.splitlines() if ln.startswith("SigBlk:")).split()[1], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def test_the_library_threads_leave_sigint_and_sigterm_to_the_main_thread(tmp_path: Path) -> None:
    cb = ctxbase.open(str(tmp_path / "s.db"), project="p", embedder="hash")
    try:
        # the capture writer, the anchoring worker, the embedding worker, a search
        cb.capture("user_message", session_id="s", text="订单列表接口太慢了, add a Redis cache")
        cb.flush()
        cb.wait_for_embeddings()
        cb.search("Redis cache")
        threads = [t for t in threading.enumerate() if t.name.startswith("ctxbase-")]
        names = {t.name for t in threads}
        assert {"ctxbase-capture", "ctxbase-anchor"} <= names, names
        checked = 0
        for thread in threads:
            blocked = _blocked(thread.native_id)
            if blocked is None:
                continue
            assert {signal.SIGINT, signal.SIGTERM} <= blocked, thread.name
            checked += 1
        assert checked >= 2
        main = _blocked(threading.main_thread().native_id)
        assert main is not None and signal.SIGINT not in main and signal.SIGTERM not in main
    finally:
        cb.close()


class _FailingBase:
    project = "p"

    def close(self) -> None:
        raise RuntimeError("3 events unwritten (last error: database is locked)")


class _Base:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_base_that_fails_to_close_at_exit_is_named_and_the_next_still_closed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxbase import exit_hooks

    # only these two: the other bases of this test process stay open
    monkeypatch.setattr(exit_hooks, "_open_bases", weakref.WeakSet())
    monkeypatch.setitem(exit_hooks._exit_state, "closing", False)
    failing, fine = _FailingBase(), _Base()
    exit_hooks.register(failing)
    exit_hooks.register(fine)
    exit_hooks.close_all()
    err = capsys.readouterr().err
    assert "closing an open base at exit failed (project 'p')" in err
    assert "database is locked" in err
    assert fine.closed
