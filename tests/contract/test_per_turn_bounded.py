"""Per-turn expiry reads only what can still be active, on every backend: storing a user
message reads the tool results after the session's previous user message, so an old per-turn
result (already expired by the turn after it) is neither read again nor re-expired, and the
rows a capture reads do not grow with the session."""

from __future__ import annotations

from typing import Any

from ctxbase import ContextBase
from ctxbase.assemble.per_turn import PER_TURN_CAUSE
from ctxbase.assemble.state import MESSAGE_SCOPE
from ctxbase.capture.events import build_event
from ctxbase.model import Event
from store_calls import StoreCalls


def _turn(cb: ContextBase, sid: str, n: int) -> str:
    cb.record("user_message", session_id=sid, text=f"question {n}")
    tool = cb.record(
        "tool_result", session_id=sid, text=f"weather {n}", metadata={"per_turn": True}
    )
    cb.record("tool_result", session_id=sid, text=f"kept result {n}")
    cb.record("assistant_message", session_id=sid, text=f"answer {n}")
    return tool.id


def _reads(cb: ContextBase) -> tuple[StoreCalls, list[Event]]:
    """Count store calls and keep every event `event_page` / `list_events` return."""
    calls = StoreCalls(cb.store)
    seen: list[Event] = []
    for name in ("event_page", "list_events"):
        method = getattr(cb.store, name)

        def kept(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
            found = _method(*args, **kwargs)
            seen.extend(found)
            return found

        setattr(cb.store, name, kept)
    return calls, seen


def test_a_user_message_reads_only_the_results_of_the_turn_before(cb: ContextBase) -> None:
    sid = "s-bounded"
    old = [_turn(cb, sid, n) for n in range(6)]
    last = _turn(cb, sid, 6)
    calls, seen = _reads(cb)
    cb.record("user_message", session_id=sid, text="next question")
    counts = dict(calls.counts)
    # the last turn's per-turn result expires, with its cause ...
    history = cb.store.state_history(cb.project, MESSAGE_SCOPE, sid, last)
    assert [(h.new_value, h.cause) for h in history] == [("expired", PER_TURN_CAUSE)]
    # ... the older ones, expired at their own next turn, are not read again nor re-expired
    read = {e.id for e in seen}
    assert not read & set(old), read & set(old)
    for tool in old:
        assert len(cb.store.state_history(cb.project, MESSAGE_SCOPE, sid, tool)) == 1
    # the statuses of the read results by key, not the session's whole record
    assert "get_state" not in counts, counts
    assert counts["get_state_keys"] >= 1, counts
    # one read for the previous user message, one page of this turn's tool results
    assert counts["event_page"] == 2, counts
    tool_results = [e.text for e in seen if e.type == "tool_result"]
    assert tool_results == ["weather 6", "kept result 6"], tool_results


def test_a_batch_expires_the_results_of_earlier_batches_without_a_user_message(
    cb: ContextBase,
) -> None:
    # results stored in batches with no user message still expire at the next batch that
    # has one, even when that batch holds two user messages (the bound is the last user
    # message stored before the batch, not the one before its newest)
    sid = "s-batches"
    cb.record("user_message", session_id=sid, text="first question")
    early = cb.record("tool_result", session_id=sid, text="early", metadata={"per_turn": True})
    stored = cb.record_events(
        [
            build_event(project_id=cb.project, session_id=sid, type=t, text=x, metadata=m)
            for t, x, m in (
                ("user_message", "second question", {}),
                ("tool_result", "inside", {"per_turn": True}),
                ("user_message", "third question", {}),
                ("tool_result", "current", {"per_turn": True}),
            )
        ]
    )
    assert cb.get_event(early.id).marks == ["expired"]
    assert cb.get_event(stored[1].id).marks == ["expired"]
    assert cb.get_event(stored[3].id).marks == []
