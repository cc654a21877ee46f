"""The assembled history under budget pressure, on every backend: the newest turns stay
without a gap, a tool call stays with its result, thoughts go first (and come in when
there is room), and a result whose call is older than the window leaves with it."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler

POLICY = """
version: 1
policies:
  - name: plain
    match: {agent_roles: [coder]}
    priority: 100
    strategies:
      - {name: recent_window, max_messages: 20}
"""
LONG = " ".join(f"the order table has column c{i} with notes." for i in range(60))


def _history(cb: ContextBase, intent: str, max_tokens: int) -> tuple[list[str], list[str]]:
    ctx = Assembler(cb, POLICY).assemble(
        session_id="s", agent_role="coder", user_intent=intent, max_tokens=max_tokens
    )
    layer = ctx.trace["layers"].get("history", {"items": []})
    return [i["id"] for i in layer["items"]], list(ctx.trace["notes"])


def _turns(cb: ContextBase) -> dict[str, str]:
    rec = cb.record
    ids: dict[str, str] = {}
    ids["q1"] = rec("user_message", session_id="s", text="how many orders came in?").id
    ids["said"] = rec("assistant_message", session_id="s", text=f"Let me count. {LONG}").id
    ids["call"] = rec(
        "tool_invocation", session_id="s", text='run_sql(sql="SELECT count(*) FROM orders")',
        parent_event_ids=[ids["said"]],
    ).id  # fmt: skip
    ids["think"] = rec(
        "internal_thought", session_id="s", text="the count looks low; check the day filter"
    ).id
    ids["result"] = rec("tool_result", session_id="s", text="42", parent_event_ids=[ids["call"]]).id
    ids["answer"] = rec("assistant_message", session_id="s", text="42 orders came in.").id
    return ids


def test_a_result_stays_with_its_call_and_thoughts_go_first(cb: ContextBase) -> None:
    ids = _turns(cb)
    # room: everything, the thought in its place
    held, _ = _history(cb, "and yesterday?", 3000)
    assert held == [ids[k] for k in ("q1", "said", "think", "result", "answer")]
    # the long message with the call does not fit: its result leaves with it, and so does
    # the question before it (no gap); the thought, newer than the call, goes first
    held, _ = _history(cb, "and yesterday?", 260)
    assert ids["answer"] in held
    assert ids["result"] not in held and ids["said"] not in held
    assert ids["q1"] not in held and ids["think"] not in held


def test_a_result_whose_call_is_older_than_the_window_leaves_with_it(cb: ContextBase) -> None:
    ids = _turns(cb)
    narrow = POLICY.replace("max_messages: 20", "max_messages: 2")
    ctx = Assembler(cb, narrow).assemble(
        session_id="s", agent_role="coder", user_intent="and yesterday?", max_tokens=3000
    )
    held = [i["id"] for i in ctx.trace["layers"]["history"]["items"]]
    assert held == [ids["answer"]]  # the result's call is in "said", outside the window
    assert any("left out with their call" in n for n in ctx.trace["notes"])
