"""Event identity on every backend: each capture is a new event, whatever its content; only a
retry of the same capture (same idempotency key or event id) is merged; a tombstone stops a
stale retry of the forgotten capture, never a new capture of the same text."""

from __future__ import annotations

import pytest

from ctxbase import ConflictError, ContextBase, NotFoundError
from ctxbase.model import Event, keyed_event_id, new_event_id
from ctxbase.store.base import Store


def _texts(cb: ContextBase, session_id: str) -> list[tuple[int | None, str | None]]:
    return [(e.seq, e.text) for e in cb.last_events(session_id, 50)]


def test_yes_question_yes_is_three_events(cb: ContextBase) -> None:
    first = cb.capture("user_message", session_id="s", text="yes", agent_id="alice")
    ask = cb.capture("assistant_message", session_id="s", text="Deploy to staging too?")
    again = cb.capture("user_message", session_id="s", text="yes", agent_id="alice")
    cb.flush()
    assert len({first, ask, again}) == 3
    assert _texts(cb, "s") == [(1, "yes"), (2, "Deploy to staging too?"), (3, "yes")]
    # synchronously too
    last = cb.record("user_message", session_id="s", text="yes", agent_id="alice")
    assert last.seq == 4 and last.id not in {first, again}


def test_forget_then_capture_the_same_content_stores_a_new_event(cb: ContextBase) -> None:
    old = cb.record("user_message", session_id="day3", text="上次那个SQL为什么慢来着？")
    cb.forget(session_id="day3")
    with pytest.raises(NotFoundError):  # the session is gone: not found, not empty
        cb.last_events("day3")
    new_id = cb.capture("user_message", session_id="day3", text="上次那个SQL为什么慢来着？")
    cb.flush()
    assert new_id is not None and new_id != old.id
    assert cb.get_session("day3").session_id == "day3"
    assert [(e.id, e.seq) for e in cb.last_events("day3")] == [(new_id, 1)]
    # and after forgetting the whole project
    cb.forget(whole_project=True)
    again = cb.record("user_message", session_id="day3", text="上次那个SQL为什么慢来着？")
    assert again.seq == 1 and _texts(cb, "day3") == [(1, "上次那个SQL为什么慢来着？")]


def test_a_retry_with_the_same_idempotency_key_stores_one_event(cb: ContextBase) -> None:
    a = cb.capture("tool_result", session_id="s", text="exit 0", idempotency_key="run-1")
    b = cb.capture("tool_result", session_id="s", text="exit 0", idempotency_key="run-1")
    cb.flush()
    c = cb.record("tool_result", session_id="s", text="exit 0", idempotency_key="run-1")
    other = cb.record("tool_result", session_id="s", text="exit 0", idempotency_key="run-2")
    assert a == b == c.id == keyed_event_id(cb.project, "s", "run-1")
    assert c.seq == 1
    assert other.id != a and other.seq == 2
    assert _texts(cb, "s") == [(1, "exit 0"), (2, "exit 0")]
    # a caller-assigned id works the same way
    own = new_event_id()
    cb.record("tool_result", session_id="s", text="exit 1", event_id=own)
    cb.capture("tool_result", session_id="s", text="exit 1", event_id=own)
    cb.flush()
    assert [e.id for e in cb.last_events("s")][-1] == own
    assert len(cb.last_events("s")) == 3


def test_a_stale_retry_of_a_forgotten_capture_is_ignored(cb: ContextBase) -> None:
    gone = cb.record("user_message", session_id="s", text="my token is 1234", idempotency_key="k")
    keep = cb.record("user_message", session_id="s", text="unrelated")
    report = cb.forget(event_ids=[gone.id])
    assert report.removed["events"] == 1
    assert cb.capture("user_message", session_id="s", text="my token is 1234", idempotency_key="k")
    cb.flush()
    stale = cb.record("user_message", session_id="s", text="my token is 1234", idempotency_key="k")
    assert stale.id == gone.id and stale.seq is None  # not stored
    assert cb.store.existing_ids(cb.project, [gone.id]) == set()
    assert [e.id for e in cb.last_events("s")] == [keep.id]
    # the same text captured anew is stored
    fresh = cb.record("user_message", session_id="s", text="my token is 1234")
    assert fresh.id != gone.id and fresh.seq == 3
    # a caller-assigned id is tombstoned the same way
    own = new_event_id()
    cb.record("user_message", session_id="s", text="x", event_id=own)
    cb.forget(event_ids=[own])
    cb.record("user_message", session_id="s", text="x", event_id=own)
    assert cb.store.existing_ids(cb.project, [own]) == set()


def test_a_re_sent_message_list_adds_only_new_messages(cb: ContextBase) -> None:
    turn1 = [{"role": "user", "content": "yes"}]
    ask = {"role": "assistant", "content": "Staging too?"}
    turn2 = [*turn1, ask, {"role": "user", "content": "yes"}]
    first = cb.capture_messages(turn1, session_id="chat")
    second = cb.capture_messages(turn2, session_id="chat")
    third = cb.capture_messages(turn2, session_id="chat", sync=True)  # the hook retries
    cb.flush()
    assert second[0] == first[0] and second == third
    assert len(set(second)) == 3
    assert _texts(cb, "chat") == [(1, "yes"), (2, "Staging too?"), (3, "yes")]
    # the same opening in another session is another conversation
    other = cb.capture_messages(turn1, session_id="chat2", sync=True)
    assert other[0] != first[0]
    # a list re-sent to a forgotten session is a stale retry of the forgotten messages
    cb.forget(session_id="chat")
    cb.capture_messages(turn2, session_id="chat", sync=True)
    with pytest.raises(NotFoundError):  # the session is gone: not found, not empty
        cb.last_events("chat")


def test_events_built_without_an_id_are_each_stored(cb: ContextBase) -> None:
    from ctxbase.model import Event

    texts = ("alpha", "beta", "gamma")
    built = [
        Event(project_id=cb.project, session_id="x", type="user_message", text=t) for t in texts
    ]
    report = cb.record_events_report(built)
    assert [(e.seq, e.text) for e in report.events] == [(1, "alpha"), (2, "beta"), (3, "gamma")]
    assert len({e.id for e in report.events}) == 3 and all(e.id for e in report.events)
    assert report.forgotten == []
    assert _texts(cb, "x") == [(1, "alpha"), (2, "beta"), (3, "gamma")]
    # each call is new events: the same id-less list written again is three more
    again = cb.record_events(built)
    assert [e.seq for e in again] == [4, 5, 6]
    assert {e.id for e in again}.isdisjoint({e.id for e in report.events})
    # each text is found under its own event
    assert cb.search("beta", preset="keyword").results[0].item.text == "beta"


def test_the_store_refuses_an_empty_event_id_and_finds_none(store: Store) -> None:
    from contract_helpers import make_event, write

    from ctxbase.errors import ValidationError

    ok = make_event("p", "s", "kept")
    blank = ok.model_copy(update={"id": "", "text": "lost"})
    with pytest.raises(ValidationError, match=r"events\[1\]\.id"):
        write(store, ok, blank)
    assert store.get_events("p", [ok.id]) == []  # nothing of the batch is written
    write(store, ok)
    assert store.get_events("p", ["", ok.id, ""]) == [store.get_events("p", [ok.id])[0]]
    assert store.get_events("p", [""], include_inactive=True) == []


def test_a_key_reused_with_different_content_is_a_conflict(cb: ContextBase) -> None:
    from ctxbase.errors import ConflictError

    yes = cb.record("user_message", session_id="s", text="yes", idempotency_key="k1")
    with pytest.raises(ConflictError, match=r"idempotency key 'k1' .* different text"):
        cb.record("user_message", session_id="s", text="no", idempotency_key="k1")
    # an identical retry still answers with the stored event; time and metadata may differ
    again = cb.record(
        "user_message", session_id="s", text="yes", idempotency_key="k1", ts=1.0,
        metadata={"attempt": 2}, importance=0.9,
    )  # fmt: skip
    assert (again.id, again.seq, again.text, again.ts) == (yes.id, 1, "yes", yes.ts)
    # data is compared as stored (key order does not matter, values do)
    cb.record("tool_result", session_id="s", data={"a": 1, "b": [1, 2]}, idempotency_key="d")
    cb.record("tool_result", session_id="s", data={"b": (1, 2), "a": 1}, idempotency_key="d")
    with pytest.raises(ConflictError, match="different data"):
        cb.record("tool_result", session_id="s", data={"a": 2, "b": [1, 2]}, idempotency_key="d")
    with pytest.raises(ConflictError, match="different type"):
        cb.record("assistant_message", session_id="s", text="yes", idempotency_key="k1")
    with pytest.raises(ConflictError, match="different parent_event_ids"):
        cb.record(
            "user_message", session_id="s", text="yes", idempotency_key="k1",
            parent_event_ids=[yes.id],
        )  # fmt: skip
    # a caller-assigned id is the same: it names one request
    own = new_event_id()
    cb.record("user_message", session_id="s", text="one", event_id=own)
    with pytest.raises(ConflictError, match=f"event id '{own}' .* different text"):
        cb.record("user_message", session_id="s", text="two", event_id=own)
    assert _texts(cb, "s") == [(1, "yes"), (2, None), (3, "one")]


def test_a_batch_with_a_conflict_writes_nothing(cb: ContextBase) -> None:
    from ctxbase.capture.events import build_event
    from ctxbase.errors import ConflictError

    def ev(text: str, key: str) -> Event:
        return build_event(
            project_id=cb.project, session_id="b", type="user_message", text=text,
            idempotency_key=key,
        )  # fmt: skip

    cb.record_events([ev("first", "a")])
    with pytest.raises(ConflictError, match="different text"):
        cb.record_events([ev("fresh", "b"), ev("changed", "a")])
    with pytest.raises(ConflictError, match="different text"):  # within one batch too
        cb.record_events([ev("fresh", "c"), ev("other", "c")])
    assert _texts(cb, "b") == [(1, "first")]
    # the same batch twice is a retry
    batch = [ev("fresh", "b"), ev("first", "a")]
    assert [e.seq for e in cb.record_events(batch)] == [2, 1]
    assert [e.seq for e in cb.record_events(batch)] == [2, 1]


def test_a_queued_capture_reusing_a_stored_key_is_refused_at_once(cb: ContextBase) -> None:
    before = cb.capture_stats().refused
    first = cb.capture("user_message", session_id="q", text="yes", idempotency_key="k")
    cb.flush()
    same = cb.capture("user_message", session_id="q", text="yes", idempotency_key="k")
    cb.flush()  # the identical retry is a duplicate, no error
    assert first == same
    # the first is stored: another request under its key is refused at the call, not
    # answered with the first's id and dropped out of sight by the writer
    with pytest.raises(ConflictError, match="different text") as err:
        cb.capture("user_message", session_id="q", text="no", idempotency_key="k")
    assert "'k'" in str(err.value)
    cb.flush()
    assert cb.capture_stats().refused == before
    assert _texts(cb, "q") == [(1, "yes")]


def test_two_queued_captures_under_one_key_before_a_write_refuse_the_second(
    cb: ContextBase,
) -> None:
    """The second, with other content, is refused: at once while the first still waits in
    the queue, else by the writer (the first may be taken already), counted and named;
    never counted as a duplicate of the first."""
    cb.capture("user_message", session_id="s1", text="付款 100 元", idempotency_key="pay-1")
    try:
        cb.capture("user_message", session_id="s1", text="付款 200 元", idempotency_key="pay-1")
        at_once = False
    except ConflictError as exc:
        assert "'pay-1'" in str(exc) and "different text" in str(exc)
        at_once = True
    cb.capture("user_message", session_id="s1", text="付款 100 元", idempotency_key="pay-1")
    cb.flush()
    stats = cb.capture_stats()
    assert [e.text for e in cb.last_events("s1", 10)] == ["付款 100 元"]
    assert stats.refused == (0 if at_once else 1)
    if not at_once:
        assert stats.last_error is not None and "different text" in stats.last_error
