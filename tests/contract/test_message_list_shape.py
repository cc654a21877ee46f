"""A caller may say what a message list is (`shape`) instead of leaving it to the guess, on
every backend: "new" stores every message, so an exchange said twice is kept twice; "history"
starts at the session's first message, adds only what the session does not hold, and refuses
a list that starts otherwise; "auto" is the guess, which says so (INFO) when a list of two or
more messages adds nothing."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.errors import ConflictError, NotFoundError, ValidationError

Msg = dict[str, Any]
SYSTEM: Msg = {"role": "system", "content": "You are a database assistant."}
EXCHANGE: list[Msg] = [
    {"role": "user", "content": "yes"},
    {"role": "assistant", "content": "ok"},
]
LOGGER = "ctxbase.message_lists"


def _texts(cb: ContextBase, session_id: str) -> list[str | None]:
    return [e.text for e in cb.last_events(session_id, 100)]


@pytest.mark.parametrize("sync", [True, False])
def test_new_keeps_an_exchange_said_twice(cb: ContextBase, sync: bool) -> None:
    first = cb.capture_messages(EXCHANGE, session_id="n", shape="new", sync=sync)
    second = cb.capture_messages(EXCHANGE, session_id="n", shape="new", sync=sync)
    cb.flush()
    assert _texts(cb, "n") == ["yes", "ok", "yes", "ok"]
    assert not set(first) & set(second)
    events = cb.last_events("n")
    assert events[2].parent_event_ids == [events[1].id]  # the second follows the first
    # a list starting with the session's system prompt is new too
    cb.capture_messages([SYSTEM, *EXCHANGE], session_id="n", shape="new", sync=True)
    assert len(_texts(cb, "n")) == 7


def test_new_with_a_key_is_retried_safely(cb: ContextBase) -> None:
    cb.capture_messages([{"role": "user", "content": "hi"}], session_id="k", sync=True)
    ids = cb.capture_messages(EXCHANGE, session_id="k", shape="new", idempotency_key="t1")
    again = cb.capture_messages(EXCHANGE, session_id="k", shape="new", idempotency_key="t1")
    cb.flush()
    assert again == ids
    later = cb.capture_messages(EXCHANGE, session_id="k", shape="new", idempotency_key="t2")
    cb.flush()
    assert not set(later) & set(ids)
    assert _texts(cb, "k") == ["hi", "yes", "ok", "yes", "ok"]
    with pytest.raises(ConflictError, match="'t2' was already used"):
        cb.capture_messages(
            [{"role": "user", "content": "no"}], session_id="k", shape="new", idempotency_key="t2"
        )
    assert len(_texts(cb, "k")) == 5


def test_new_tool_result_answers_a_call_of_an_earlier_list(cb: ContextBase) -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "count_rows", "arguments": "{}"}}],
    }
    asked = cb.capture_messages([call], session_id="t", shape="new", sync=True)
    result = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    answered = cb.capture_messages([result, *EXCHANGE], session_id="t", shape="new", sync=True)
    assert cb.get_event(answered[0]).parent_event_ids == [asked[-1]]


def test_history_adds_only_its_tail(cb: ContextBase) -> None:
    history = [SYSTEM, *EXCHANGE]
    first = cb.capture_messages(history, session_id="h", shape="history", sync=True)
    history += EXCHANGE  # the user says it again: the history holds both
    second = cb.capture_messages(history, session_id="h", shape="history")
    cb.flush()
    assert second[:3] == first and len(set(second)) == 5
    assert _texts(cb, "h") == [SYSTEM["content"], "yes", "ok", "yes", "ok"]
    # re-sent whole, or a shorter history sent late: nothing added, the same ids
    assert cb.capture_messages(history, session_id="h", shape="history", sync=True) == second
    assert cb.capture_messages(history[:2], session_id="h", shape="history") == second[:2]
    cb.flush()
    assert len(_texts(cb, "h")) == 5
    # a session first written in another shape is a history all the same
    cb.capture_messages(EXCHANGE, session_id="m", shape="new", sync=True)
    cb.capture_messages(EXCHANGE, session_id="m", shape="new", sync=True)
    more = [*EXCHANGE, *EXCHANGE, {"role": "user", "content": "bye"}]
    cb.capture_messages(more, session_id="m", shape="history", sync=True)
    assert _texts(cb, "m") == ["yes", "ok", "yes", "ok", "bye"]


def test_history_not_starting_at_the_session_start_is_refused(cb: ContextBase) -> None:
    cb.capture_messages([SYSTEM, *EXCHANGE], session_id="x", shape="history", sync=True)
    for wrong in (EXCHANGE, [SYSTEM, EXCHANGE[1]], [*EXCHANGE, *EXCHANGE]):
        with pytest.raises(ConflictError, match="shape='history'") as err:
            cb.capture_messages(wrong, session_id="x", shape="history", sync=True)
        assert "session 'x'" in str(err.value)
    with pytest.raises(ConflictError, match=r"messages\[1\]"):
        cb.capture_messages([SYSTEM, EXCHANGE[1]], session_id="x", shape="history")
    cb.flush()
    assert _texts(cb, "x") == [SYSTEM["content"], "yes", "ok"]  # nothing written


def test_history_past_a_forgotten_message(cb: ContextBase) -> None:
    history = [SYSTEM, {"role": "user", "content": "my pin is 1234"}, *EXCHANGE]
    ids = cb.capture_messages(history, session_id="f", shape="history", sync=True)
    cb.forget(event_ids=[ids[1]])
    history.append({"role": "user", "content": "thanks"})
    again = cb.capture_messages(history, session_id="f", shape="history", sync=True)
    assert again[:4] == ids
    assert _texts(cb, "f") == [SYSTEM["content"], "yes", "ok", "thanks"]
    # the history as the session holds it now, without the forgotten message, is one too
    now = [SYSTEM, *EXCHANGE, history[-1], {"role": "assistant", "content": "welcome"}]
    cb.capture_messages(now, session_id="f", shape="history", sync=True)
    assert _texts(cb, "f") == [SYSTEM["content"], "yes", "ok", "thanks", "welcome"]


def test_history_keyed_retry_and_reused_key(cb: ContextBase) -> None:
    history = [SYSTEM, *EXCHANGE]
    ids = cb.capture_messages(history, session_id="r", shape="history", idempotency_key="a")
    again = cb.capture_messages(history, session_id="r", shape="history", idempotency_key="a")
    assert again == ids
    with pytest.raises(ConflictError, match="'a' was already used"):
        cb.capture_messages(
            [*history, {"role": "user", "content": "more"}],
            session_id="r",
            shape="history",
            idempotency_key="a",
        )
    cb.flush()
    assert len(_texts(cb, "r")) == 3


def test_auto_is_unchanged_and_says_when_a_list_adds_nothing(
    cb: ContextBase, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    cb.capture_messages(EXCHANGE, session_id="a", sync=True)
    assert not caplog.records
    twice = cb.capture_messages(EXCHANGE, session_id="a", sync=True)
    assert _texts(cb, "a") == ["yes", "ok"]  # taken as sent before: the guess is kept
    assert len(twice) == 2
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.INFO
    assert "2 messages" in record.getMessage() and "'a'" in record.getMessage()
    assert "shape='new'" in record.getMessage()
    caplog.clear()
    # a single message is new (no notice), and so is a keyed retry's (a retry, not a guess)
    cb.capture_messages([EXCHANGE[1]], session_id="a", sync=True)
    cb.capture_messages(EXCHANGE, session_id="a", idempotency_key="k", sync=True)
    cb.capture_messages(EXCHANGE, session_id="a", idempotency_key="k", sync=True)
    assert not [r for r in caplog.records if r.name == LOGGER]
    assert _texts(cb, "a") == ["yes", "ok", "ok", "yes", "ok"]


def test_a_bad_shape_is_refused_by_name(cb: ContextBase) -> None:
    for bad in ("News", "", None, 1):
        with pytest.raises(ValidationError) as err:
            cb.capture_messages(EXCHANGE, session_id="b", shape=bad)  # type: ignore[arg-type]
        assert err.value.field == "shape" and "'auto', 'new', 'history'" in str(err.value)
    cb.flush()
    with pytest.raises(NotFoundError):  # nothing was written
        cb.last_events("b")
