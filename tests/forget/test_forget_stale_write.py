"""A write of an event id the project forgot (on SQLite and PostgreSQL): the stale-retry
rule keeps it out (a forgotten id is never written again), and the answer says so:
`record` gives the event back as built with no seq, `record_events_report` names it in
`forgotten`, beside events stored now or before, which it does not name."""

from __future__ import annotations

import pytest

from ctxbase import ContextBase
from ctxbase.capture.events import build_event
from ctxbase.errors import NotFoundError
from ctxbase.model import Event


def _keyed(cb: ContextBase, key: str, text: str) -> Event:
    return build_event(
        project_id=cb.project, session_id="s1", type="user_message", text=text, idempotency_key=key
    )


def test_a_retry_of_a_forgotten_event_is_not_written_and_says_so(cb: ContextBase) -> None:
    first = cb.record(
        "user_message", session_id="s1", text="the token is abc123", idempotency_key="k1"
    )
    kept = cb.record("user_message", session_id="s1", text="kept", idempotency_key="k2")
    assert first.seq == 1 and cb.forget(event_ids=[first.id]).removed["events"] == 1
    # record: the event as built (no seq), nothing stored
    again = cb.record(
        "user_message", session_id="s1", text="the token is abc123", idempotency_key="k1"
    )
    assert (again.id, again.seq, again.text) == (first.id, None, "the token is abc123")
    with pytest.raises(NotFoundError):
        cb.get_event(first.id)
    # the report names it, and only it: a retry of a stored event and a new one are stored
    fresh = _keyed(cb, "k3", "a new note")
    report = cb.record_events_report([_keyed(cb, "k1", "the token is abc123"), kept, fresh])
    assert report.forgotten == [first.id]
    assert [(e.id, e.seq) for e in report.events] == [(first.id, None), (kept.id, 2), (fresh.id, 3)]
    assert [e.id for e in report.stored] == [kept.id, fresh.id]
    assert cb.record_events([fresh])[0].seq == 3  # the list API: as stored, as before
    assert cb.record_events_report([kept, fresh]).forgotten == []
    assert cb.record_events_report([]).events == []
    # a whole session forgotten: its events' retries are reported the same way
    cb.forget(session_id="s1")
    gone = cb.record_events_report([_keyed(cb, "k2", "kept"), _keyed(cb, "k3", "a new note")])
    assert gone.forgotten == [kept.id, fresh.id] and gone.stored == []
    assert cb.forget(session_id="s1").already_forgotten == ["s1"]  # nothing came back
