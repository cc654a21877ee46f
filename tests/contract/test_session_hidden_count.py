"""A session says how many of its events are hidden: one that `forget --soft` hid whole
keeps its status (active), and an agent listing sessions must still tell it apart. The
library, the tools and (through them) the remote client read the same count, on every
backend."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.integrations.tools import ToolScope, run_tool


def test_list_and_get_session_count_the_hidden_events(cb: ContextBase) -> None:
    cb.record("user_message", session_id="s1", text="keep this")
    gone = cb.record("user_message", session_id="s1", text="hide this")
    cb.record("user_message", session_id="s2", text="all of it")
    assert {s.session_id: s.hidden_events for s in cb.list_sessions()} == {"s1": 0, "s2": 0}
    cb.soft_delete([gone.id])
    scope = ToolScope(cb, agent_id="a")
    run_tool(scope, "forget", {"session_id": "s2"})  # hides the whole session
    counts = {s.session_id: (s.status, s.hidden_events) for s in cb.list_sessions()}
    assert counts == {"s1": ("active", 1), "s2": ("active", 1)}
    assert cb.get_session("s1").hidden_events == 1
    listed = run_tool(scope, "list_sessions", {})["sessions"]
    assert {s["session_id"]: s["hidden_events"] for s in listed} == {"s1": 1, "s2": 1}
    cb.restore([gone.id])
    assert cb.get_session("s1").hidden_events == 0
