"""Tool calls and results in retrieved memory: a result names the call it answers and sits
right after it; the newer SQL's results come with it under a recency cue; a message shows
its calls; memory does not repeat what another session's identical turns in the history
say; a bare name a turn in memory says takes no slot."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.memory_calls import memory_units
from ctxbase.assemble.memory_candidate import MemoryCandidate, label_day
from ctxbase.assemble.repeats import calls_held, same_result

DAY = 86400.0
OLD_SQL = "SELECT customer_id, count(*) FROM orders GROUP BY customer_id"
NEW_SQL = "SELECT r.id, p.amount FROM refunds r JOIN payments p ON p.id = r.payment_id"
STALE_SQL = "SELECT count(*) FROM orders_archive WHERE status = 'stale'"
STALE_CALL = f'run_sql(sql="{STALE_SQL}")'


def _memory(ctx: Any) -> str:
    found = [m["content"] for m in ctx.messages if "Retrieved context" in m["content"]]
    return found[0] if found else ""


def _blocks(memory: str) -> list[str]:
    # after the header and the opening tag, before the closing one
    return memory.split("\n", 2)[2].removesuffix("\n</quoted_data>").split("\n\n") if memory else []


def _day(cb: ContextBase, event_id: str) -> str:
    """The day a memory label shows for the event (the UTC day it was said)."""
    return label_day(cb.get_event(event_id).ts)


def _dropped(ctx: Any, owner_id: str) -> list[dict[str, Any]]:
    return [d for d in ctx.trace["dropped"] if d["id"] == owner_id]


def _run(cb: ContextBase, session: str, ago: float, sql: str, result: str) -> tuple[str, str]:
    now = time.time()
    ask = cb.capture("user_message", session_id=session, text=f"run {sql[:20]}", ts=now - ago)
    call = cb.capture(
        "tool_invocation",
        session_id=session,
        text=f"run_sql({sql})",
        parent_event_ids=[ask],
        ts=now - ago + 5,
    )
    res = cb.capture(
        "tool_result", session_id=session, text=result, parent_event_ids=[call], ts=now - ago + 9
    )
    return call, res


@pytest.mark.parametrize(
    "question", ["Why was the SQL from last time slow?", "上次那个SQL为什么慢来着？"]
)
def test_each_result_names_its_call_and_follows_it_newest_sql_first(
    cb: ContextBase, question: str
) -> None:
    old_call, old_res = _run(cb, "s-old", 3 * DAY, OLD_SQL, "1532 rows, 4.2 s")
    new_call, new_res = _run(cb, "s-new", 1 * DAY, NEW_SQL, "87 rows, 9.8 s")
    cb.flush()
    cb.wait_for_embeddings()
    cb.capture("user_message", session_id="ask", text=question)
    cb.flush()
    ctx = cb.assemble_context(agent_role="coder", user_intent=question, session_id="ask")
    blocks = _blocks(_memory(ctx))
    heads = [b.split("\n", 1)[0] for b in blocks]
    # the results say which call they answer, and each comes right after its call
    assert f"[tool result {old_res} of {old_call} run_sql, {_day(cb, old_res)}]" in heads
    assert f"[tool result {new_res} of {new_call} run_sql, {_day(cb, new_res)}]" in heads
    for call, res in ((old_call, old_res), (new_call, new_res)):
        i = heads.index(f"[tool call {call}, {_day(cb, call)}]")
        assert heads[i + 1].startswith(f"[tool result {res} of {call}")
    # under the recency cue the newer SQL, with its result, comes before the older one
    new_at = heads.index(f"[tool call {new_call}, {_day(cb, new_call)}]")
    assert new_at < heads.index(f"[tool call {old_call}, {_day(cb, old_call)}]")
    memory = _memory(ctx)
    assert memory.index("9.8 s") < memory.index("GROUP BY") < memory.index("4.2 s")


def _turns(text: str | None) -> list[dict[str, Any]]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "run_sql", "arguments": json.dumps({"sql": STALE_SQL})},
    }
    return [
        {"role": "user", "content": "How many stale orders are in the archive table?"},
        {"role": "assistant", "content": text, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {"role": "assistant", "content": "There are 42 stale archived orders."},
        {"role": "user", "content": "OK, delete them next week. Also the cache TTL is 300 s."},
        {"role": "assistant", "content": "Noted: delete next week, TTL 300 s."},
    ]


def _events(cb: ContextBase, session: str) -> dict[str, str]:
    """The session's lead-in message, call and result ids."""
    events = cb.last_events(session, 20)
    call = next(e for e in events if e.type == "tool_invocation")
    result = next(e for e in events if e.type == "tool_result")
    return {"message": call.parent_event_ids[0], "call": call.id, "result": result.id}


def test_the_same_turns_of_another_session_are_not_repeated(cb: ContextBase) -> None:
    cb.capture_messages(_turns("Let me count the stale archived orders."), session_id="a")
    cb.capture_messages(_turns(None), session_id="b")  # the same turn, made only of the call
    cb.flush()
    cb.wait_for_embeddings()
    a, b = _events(cb, "a"), _events(cb, "b")
    ctx = cb.assemble_context(
        agent_role="coder",
        user_intent="why did the stale orders count query return 42?",
        session_id="b",
    )
    memory = _memory(ctx)
    body = json.dumps(ctx.messages)
    assert body.count(STALE_SQL) == 1, body  # once, in the history
    assert "Let me count" not in memory and a["result"] not in memory
    (result_drop,) = _dropped(ctx, a["result"])
    assert result_drop["reason"] == "in history"
    assert (
        result_drop["detail"] == f"the same result of the same call as {b['result']} in the history"
    )
    (message_drop,) = _dropped(ctx, a["message"])
    assert message_drop["reason"] == "in history"
    assert message_drop["detail"] == f"its calls are in the history ({b['message']})"


def test_a_message_in_memory_shows_its_call_and_its_result_follows(cb: ContextBase) -> None:
    cb.capture_messages(_turns("Let me count the stale archived orders."), session_id="a")
    cb.flush()
    cb.wait_for_embeddings()
    a = _events(cb, "a")
    cb.capture("user_message", session_id="asker", text="hi, new session here")
    cb.flush()
    ctx = cb.assemble_context(
        agent_role="coder",
        user_intent="which SQL counted the stale archived orders, and what did it return?",
        session_id="asker",
    )
    blocks = _blocks(_memory(ctx))
    i = next(n for n, b in enumerate(blocks) if b.startswith(f"[message {a['message']}, "))
    assert blocks[i].splitlines()[1:] == ["Let me count the stale archived orders.", STALE_CALL]
    day = _day(cb, a["result"])
    assert blocks[i + 1] == f"[tool result {a['result']} of {a['call']} run_sql, {day}]\n42"
    # the call is shown once, in its message's block; the trace says so
    assert _memory(ctx).count(STALE_SQL) == 1
    (call_drop,) = _dropped(ctx, a["call"])
    assert call_drop["detail"] == f"a call of {a['message']}, shown with it"
    # a bare name the call in memory says takes no slot of its own
    named = [
        d
        for d in ctx.trace["dropped"]
        if d["id"].startswith("mention:") and d["reason"] == "duplicate"
    ]
    assert any(re.search(r"a bare name; ev_\w+ in memory says it", d["detail"]) for d in named)
    assert "table orders_archive" not in _memory(ctx)


def test_same_result_needs_the_same_call() -> None:
    history = {"h1": "42", "h2": "There are 42."}
    calls = {"h1": STALE_CALL}
    assert same_result("42", STALE_CALL, history, calls) == "h1"
    assert same_result("42", 'run_sql(sql="SELECT count(*) FROM orders")', history, calls) is None
    assert same_result("43", STALE_CALL, history, calls) is None
    assert same_result("42", "", history, calls) is None


def test_calls_held_when_the_message_is_mostly_its_calls() -> None:
    history = {"h": STALE_CALL}
    lead_in = f"Let me count them.\n{STALE_CALL}"
    assert calls_held(lead_in, [STALE_CALL], history) == ["h"]
    # a message that says much more than its call keeps its place
    long_text = "The totals drifted after the March migration of the archive schema; " * 3
    assert calls_held(f"{long_text}\n{STALE_CALL}", [STALE_CALL], history) is None
    # a short call (run_tests()) says too little to stand for the turn
    assert calls_held("Run them.\nrun_tests()", ["run_tests()"], {"h": "run_tests()"}) is None
    assert calls_held(lead_in, [STALE_CALL], {"h": "something else entirely, not the call"}) is None


def _cand(oid: str, type_: str, score: float, ts: float, **kw: Any) -> MemoryCandidate:
    return MemoryCandidate(oid, "event", type_, "", oid, score, ts=ts, **kw)


def test_memory_units_keep_a_call_with_its_results_and_order_cued_calls_by_time() -> None:
    cands = {
        c.owner_id: c
        for c in (
            _cand("r_old", "tool_result", 0.9, 1.0, unit="c_old"),
            _cand("c_new", "tool_invocation", 0.7, 5.0, cued=True),
            _cand("c_old", "tool_invocation", 0.6, 0.5, cued=True),
            _cand("r_new", "tool_result", 0.3, 6.0, unit="c_new"),
            _cand("m", "user_message", 0.8, 2.0),
        )
    }
    units = memory_units(cands)
    assert [ids for _, ids in units] == [["c_new", "r_new"], ["m"], ["c_old", "r_old"]]
    assert [score for score, _ in units] == [0.9, 0.8, 0.7]
    # without a recency cue a unit ranks at the better of its scores
    for c in cands.values():
        c.cued = False
    assert [ids for _, ids in memory_units(cands)] == [
        ["c_old", "r_old"],
        ["m"],
        ["c_new", "r_new"],
    ]
