"""An archived session is read-only on every backend: every way of capturing into it is
refused with ConflictError and stores nothing; what was captured before the archive is
kept; a session archived behind this base's back is found when the events are written, and
the refused events are counted, not lost silently."""

from __future__ import annotations

import pytest

from ctxbase import ContextBase
from ctxbase.capture.events import build_event
from ctxbase.errors import ConflictError, NotFoundError


def _texts(cb: ContextBase, session_id: str) -> list[str | None]:
    return [e.text for e in cb.last_events(session_id, 100)]


def test_every_capture_into_an_archived_session_is_refused(cb: ContextBase) -> None:
    cb.record("user_message", session_id="s1", text="cache orders for 5 minutes")
    queued = cb.capture("assistant_message", session_id="s1", text="noted")  # not flushed
    assert cb.archive_session("s1").status == "archived"
    assert _texts(cb, "s1") == ["cache orders for 5 minutes", "noted"]  # stored first
    assert queued == cb.last_events("s1")[-1].id
    with pytest.raises(ConflictError, match="archived"):
        cb.capture("user_message", session_id="s1", text="x")
    with pytest.raises(ConflictError, match="archived"):
        cb.record("user_message", session_id="s1", text="x")
    with pytest.raises(ConflictError, match="archived"):
        cb.capture_messages([{"role": "user", "content": "x"}], session_id="s1")
    with pytest.raises(ConflictError, match="archived"):
        cb.capture_messages([{"role": "user", "content": "x"}], session_id="s1", sync=True)
    live = build_event(project_id=cb.project, session_id="s2", type="user_message", text="y")
    dead = build_event(project_id=cb.project, session_id="s1", type="user_message", text="x")
    with pytest.raises(ConflictError, match="archived"):
        cb.record_events([live, dead])  # all or nothing
    cb.flush()
    assert _texts(cb, "s1") == ["cache orders for 5 minutes", "noted"]
    with pytest.raises(NotFoundError):  # the refused batch made no session either
        _texts(cb, "s2")
    assert cb.capture_stats().refused == 0  # refused at the call, nothing reached the writer
    # other sessions take captures as before
    cb.capture("user_message", session_id="s2", text="y")
    cb.flush()
    assert _texts(cb, "s2") == ["y"]


def test_a_session_archived_elsewhere_refuses_events_when_they_are_written(
    cb: ContextBase,
) -> None:
    cb.record("user_message", session_id="s1", text="first")
    # archived without this base's archive_session (as another process would): the base
    # does not know yet, so the capture is queued and refused by the writer
    cb.context_manager().archive_session("s1")
    eid = cb.capture("user_message", session_id="s1", text="late")
    cb.capture("user_message", session_id="s2", text="elsewhere")
    cb.flush()
    assert eid is not None
    assert cb.store.existing_ids(cb.project, [eid]) == set()
    assert _texts(cb, "s1") == ["first"] and _texts(cb, "s2") == ["elsewhere"]
    stats = cb.capture_stats()
    assert stats.refused == 1 and stats.duplicates == 0
    assert stats.last_error is not None and "'s1' is archived" in stats.last_error
    # now known: refused at once
    with pytest.raises(ConflictError):
        cb.capture("user_message", session_id="s1", text="again")


def test_a_synchronous_write_reads_the_session_state(cb: ContextBase) -> None:
    cb.record("user_message", session_id="s1", text="first")
    cb.context_manager().archive_session("s1")
    with pytest.raises(ConflictError, match="archived"):
        cb.record("user_message", session_id="s1", text="late")
    with pytest.raises(ConflictError, match="archived"):
        cb.capture_messages([{"role": "user", "content": "late"}], session_id="s1", sync=True)
    assert _texts(cb, "s1") == ["first"]


def test_a_forgotten_archived_session_may_start_again(cb: ContextBase) -> None:
    cb.record("user_message", session_id="s1", text="old")
    cb.archive_session("s1")
    cb.forget(session_id="s1")
    cb.capture("user_message", session_id="s1", text="new")
    cb.flush()
    assert _texts(cb, "s1") == ["new"]
    assert cb.get_session("s1").status != "archived"
