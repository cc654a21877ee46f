"""An expired session is idle, not closed, on every backend: every way of capturing into it
stores the event and makes the session active again (expired -> active, cause "capture", in
its status log); a retry that stores nothing leaves it expired; only the archive refuses
captures."""

from __future__ import annotations

import time

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.lifecycle import Status
from ctxbase.capture.events import build_event
from ctxbase.errors import ConflictError


def test_a_capture_reactivates_an_expired_session(cb: ContextBase) -> None:
    # Idle expiry is not a close: every capture path stores the event and makes the session
    # active again, with the move in its status log; a retry that stores nothing does not.
    now = time.time()
    for sid in ("queued", "synced", "listed", "batch"):
        cb.record("user_message", session_id=sid, text="hello", idempotency_key=f"k-{sid}")
    assert sorted(cb.expire_idle_sessions(idle_timeout_s=600, now=now + 3600)) == [
        "batch",
        "listed",
        "queued",
        "synced",
    ]
    cb.record("user_message", session_id="synced", text="hello", idempotency_key="k-synced")
    assert cb.get_session("synced").status == Status.EXPIRED  # a retry: nothing new stored
    cb.capture("user_message", session_id="queued", text="back again")
    cb.flush()
    cb.record("user_message", session_id="synced", text="back again")
    cb.capture_messages([{"role": "user", "content": "back again"}], session_id="listed")
    cb.flush()
    built = cb.record_events(
        [
            build_event(
                project_id=cb.project, session_id="batch", type="user_message", text="back again"
            )
        ]
    )
    assert built[0].seq is not None
    for sid in ("queued", "synced", "listed", "batch"):
        info = cb.get_session(sid)
        assert info.status == Status.ACTIVE, sid
        entry = info.metadata["status_log"][-1]
        assert (entry["from"], entry["to"], entry["cause"]) == ("expired", "active", "capture")
        assert [e.text for e in cb.last_events(sid)][-1] == "back again"
    # an explicit expiry is undone the same way; only the archive refuses captures
    cb.expire_session("synced")
    cb.record("user_message", session_id="synced", text="once more")
    assert cb.get_session("synced").status == Status.ACTIVE
    cb.archive_session("synced")
    with pytest.raises(ConflictError, match="archived"):
        cb.record("user_message", session_id="synced", text="too late")
