"""Message lists on every backend, in the three shapes callers send: the whole history each
turn, a window of the last messages, and only the new messages. What equals the session's
last stored messages was sent before; everything else is a new event, even a message
identical to an earlier one; a single message is always new; a keyed call is a retry."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.errors import ConflictError, NotFoundError, ValidationError

Msg = dict[str, Any]


def _user(text: str) -> Msg:
    return {"role": "user", "content": text}


def _bot(text: str) -> Msg:
    return {"role": "assistant", "content": text}


SYSTEM: Msg = {"role": "system", "content": "You are a database assistant."}
# A conversation where the user says "yes" three times and the assistant repeats itself.
TURNS: list[Msg] = [
    _bot("Drop orders_tmp?"),
    _user("yes"),
    _bot("Drop orders too?"),
    _user("yes"),
    _bot("Done."),
    _user("yes"),
    _bot("Done."),
]


def _texts(cb: ContextBase, session_id: str) -> list[str | None]:
    return [e.text for e in cb.last_events(session_id, 100)]


def test_one_new_message_per_call_keeps_every_repeat(cb: ContextBase) -> None:
    ids = [cb.capture_messages([m], session_id="s") for m in TURNS]
    cb.flush()
    assert _texts(cb, "s") == [m["content"] for m in TURNS]
    assert len({i for one in ids for i in one}) == len(TURNS)
    events = cb.last_events("s", 100)
    # each message follows the one before it, as in a list sent whole
    for before, after in itertools.pairwise(events):
        assert after.parent_event_ids == [before.id]
    # synchronously too
    cb.capture_messages([_user("yes")], session_id="s", sync=True)
    cb.capture_messages([_user("yes")], session_id="s", sync=True)
    assert _texts(cb, "s")[-3:] == ["Done.", "yes", "yes"]


def test_the_whole_history_each_turn_adds_only_the_new_messages(cb: ContextBase) -> None:
    history: list[Msg] = [SYSTEM]
    seen: list[str] = []
    for i in range(0, len(TURNS), 2):
        history += TURNS[i : i + 2]
        ids = cb.capture_messages(history, session_id="h")
        assert ids[: len(seen)] == seen  # what was sent before keeps its ids
        seen = ids
    again = cb.capture_messages(history, session_id="h")  # the hook fires twice
    cb.flush()
    assert again == seen
    assert _texts(cb, "h") == [SYSTEM["content"], *(m["content"] for m in TURNS)]


def test_a_window_of_the_last_messages_adds_only_what_is_not_stored(cb: ContextBase) -> None:
    history: list[Msg] = []
    for i in range(0, len(TURNS), 2):
        history += TURNS[i : i + 2]
        # the last three messages, after the system prompt (trim_messages, include_system)
        cb.capture_messages([SYSTEM, *history[-3:]], session_id="w", sync=True)
    assert _texts(cb, "w") == [SYSTEM["content"], *(m["content"] for m in TURNS)]
    # without the system prompt, and a window of four
    history = []
    for i in range(0, len(TURNS), 2):
        history += TURNS[i : i + 2]
        cb.capture_messages(history[-4:], session_id="w4")
    cb.capture_messages(history[-4:], session_id="w4")  # resent: nothing new
    cb.flush()
    assert _texts(cb, "w4") == [m["content"] for m in TURNS]


def test_a_list_queued_but_not_yet_written_counts_as_sent(cb: ContextBase) -> None:
    first = cb.capture_messages([SYSTEM, _user("hi")], session_id="q")
    second = cb.capture_messages([SYSTEM, _user("hi"), _bot("hello")], session_id="q")
    assert second[:2] == first  # found in the queue, before any flush
    cb.flush()
    assert _texts(cb, "q") == [SYSTEM["content"], "hi", "hello"]


def test_a_retried_call_adds_nothing_when_it_can_be_told_apart(cb: ContextBase) -> None:
    pair = [_bot("Drop orders too?"), _user("yes")]
    cb.capture_messages([_bot("Drop orders_tmp?"), _user("yes")], session_id="r", sync=True)
    first = cb.capture_messages(pair, session_id="r", sync=True)
    retry = cb.capture_messages(pair, session_id="r", sync=True)  # the answer was lost
    assert retry == first
    assert _texts(cb, "r") == ["Drop orders_tmp?", "yes", "Drop orders too?", "yes"]
    # a single message cannot be told from a repeat: with a key, its retry is one event
    one = cb.capture_messages([_user("yes")], session_id="r", idempotency_key="call-7")
    cb.flush()
    same = cb.capture_messages([_user("yes")], session_id="r", idempotency_key="call-7")
    cb.flush()
    assert same == one
    assert _texts(cb, "r") == ["Drop orders_tmp?", "yes", "Drop orders too?", "yes", "yes"]
    # and without a key it is kept: the user said it again
    cb.capture_messages([_user("yes")], session_id="r", sync=True)
    assert _texts(cb, "r")[-2:] == ["yes", "yes"] and len(_texts(cb, "r")) == 6


def test_a_hidden_message_still_counts_as_sent(cb: ContextBase) -> None:
    history = [SYSTEM, *TURNS[:4]]
    ids = cb.capture_messages(history, session_id="x", sync=True)
    cb.soft_delete([ids[2]])
    again = cb.capture_messages([*history, _bot("ok")], session_id="x", sync=True)
    assert again[:5] == ids
    assert len(cb.store.list_events(cb.project, "x", include_inactive=True)) == 6


def test_a_tool_result_may_answer_a_call_sent_in_an_earlier_list(cb: ContextBase) -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "count_rows", "arguments": "{}"}}],
    }
    asked = cb.capture_messages([_user("how many rows?"), call], session_id="t", sync=True)
    answered = cb.capture_messages(
        [{"role": "tool", "tool_call_id": "c1", "content": "42"}], session_id="t", sync=True
    )
    result = cb.get_event(answered[0])
    assert result.type == "tool_result" and result.parent_event_ids == [asked[-1]]
    with pytest.raises(ValidationError) as err:
        cb.capture_messages(
            [{"role": "tool", "tool_call_id": "nope", "content": "?"}], session_id="t"
        )
    assert err.value.field == "messages[0].tool_call_id"


def test_a_history_re_sent_after_a_forget_keeps_the_forgotten_out(cb: ContextBase) -> None:
    history = [SYSTEM, _user("my password is hunter2"), _bot("noted"), _user("thanks")]
    ids = cb.capture_messages(history, session_id="f", sync=True)
    cb.forget(event_ids=[ids[1]])
    history.append(_bot("welcome"))
    again = cb.capture_messages(history, session_id="f", sync=True)
    assert again[:4] == ids
    texts = _texts(cb, "f")
    assert texts == [SYSTEM["content"], "noted", "thanks", "welcome"]
    # the whole session forgotten: the re-sent history is a stale retry, nothing comes back
    cb.forget(session_id="f")
    cb.capture_messages(history, session_id="f", sync=True)
    with pytest.raises(NotFoundError):  # nor the session
        _texts(cb, "f")


def test_new_messages_equal_to_the_session_start_are_new(cb: ContextBase) -> None:
    # the session begins with "yes"; later the same two messages come as new ones
    cb.capture_messages([_user("yes"), _bot("ok")], session_id="n", sync=True)
    cb.capture_messages([_user("later"), _bot("sure")], session_id="n", sync=True)
    cb.forget(event_ids=[cb.last_events("n")[1].id])  # a forgotten message in between
    cb.capture_messages([_user("yes"), _bot("ok")], session_id="n", sync=True)
    assert _texts(cb, "n") == ["yes", "later", "sure", "yes", "ok"]


def test_a_keyed_retry_of_a_queued_call_adds_nothing(cb: ContextBase) -> None:
    one = cb.capture_messages([_user("yes")], session_id="k", idempotency_key="a")
    same = cb.capture_messages([_user("yes")], session_id="k", idempotency_key="a")
    other = cb.capture_messages([_user("yes")], session_id="k", idempotency_key="b")
    cb.flush()
    assert same == one and other != one
    events = cb.last_events("k")
    assert [e.text for e in events] == ["yes", "yes"]
    assert [e.metadata["capture_call"] for e in events] == ["a", "b"]
    # the retry of a call that came before another one is still found
    again = cb.capture_messages([_user("yes")], session_id="k", idempotency_key="a", sync=True)
    assert again == one and len(cb.last_events("k")) == 2
    with pytest.raises(ValidationError) as err:
        cb.capture_messages([_user("yes")], session_id="k", idempotency_key=" ")
    assert err.value.field == "idempotency_key"


def test_a_keyed_retry_after_a_forget_adds_nothing_and_other_messages_conflict(
    cb: ContextBase,
) -> None:
    pair = [_bot("Drop orders?"), _user("yes, my card is 4111")]
    cb.capture_messages([_user("hi")], session_id="g", sync=True)
    for gone in (1, 0):  # the call's last message forgotten, then its first
        sid = f"g{gone}"
        cb.capture_messages([_user("hi")], session_id=sid, sync=True)
        ids = cb.capture_messages(pair, session_id=sid, idempotency_key="c", sync=True)
        cb.forget(event_ids=[ids[gone]])
        again = cb.capture_messages(pair, session_id=sid, idempotency_key="c", sync=True)
        assert again == ids, gone
        kept = [m["content"] for i, m in enumerate(pair) if i != gone]
        assert _texts(cb, sid) == ["hi", *kept], gone
        with pytest.raises(ConflictError, match="'c' was already used"):
            cb.capture_messages([_user("no")], session_id=sid, idempotency_key="c", sync=True)
        assert _texts(cb, sid) == ["hi", *kept], gone
