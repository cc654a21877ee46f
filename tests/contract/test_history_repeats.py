"""A tool result captured twice under the same call (a hook that fired twice) is stored
twice, as every capture is, and the prompt says it once: the history keeps the first and
names the repeat in the trace's drops; memory leaves the repeat out as in the history. A
different result of the call, or the same text answering another call, stays."""

from __future__ import annotations

import json

from ctxbase import ContextBase


def test_the_same_result_of_one_call_is_said_once(cb: ContextBase) -> None:
    cb.record("user_message", session_id="s", text="上海和北京天气怎么样")
    call = cb.record("tool_invocation", session_id="s", text="get_weather(city='上海')")
    first = cb.record(
        "tool_result", session_id="s", text="上海 小雨 18度", parent_event_ids=[call.id]
    )
    again = cb.record(
        "tool_result", session_id="s", text="上海 小雨 18度 ", parent_event_ids=[call.id]
    )
    changed = cb.record(
        "tool_result", session_id="s", text="上海 晴 20度", parent_event_ids=[call.id]
    )
    other = cb.record("tool_invocation", session_id="s", text="get_weather(city='北京')")
    same_text = cb.record(
        "tool_result", session_id="s", text="上海 小雨 18度", parent_event_ids=[other.id]
    )
    assert len(cb.last_events("s", 10)) == 7  # stored as captured: repeats are kept

    ctx = cb.assemble_context(
        agent_role="executor", user_intent="上海和北京天气怎么样", session_id="s"
    )
    prompt = json.dumps(ctx.payload()["messages"], ensure_ascii=False)
    assert prompt.count("上海 小雨 18度") == 2  # the first call's once, the second call's
    assert prompt.count("上海 晴 20度") == 1
    drops = [d for d in cb.get_trace(ctx.context_id)["dropped"] if d["layer"] == "history"]
    assert drops == [
        {
            "id": again.id,
            "layer": "history",
            "reason": "repeat",
            "detail": f"the same result of {call.id} as {first.id}",
        }
    ]
    kept = {first.id, changed.id, same_text.id}
    assert kept.isdisjoint(d["id"] for d in drops)
