"""A turn of the session older than the history window, or in it but past the history's
token quota, is not shown whole in the prompt's history, so memory may recall it (once):
only what the history shows is left out of memory as said there."""

from __future__ import annotations

import json

from ctxbase import ContextBase

KEY = "The deploy window for payments is Tuesday 03:00 UTC, never during business hours."


def _session(cb: ContextBase, fillers: int) -> str:
    key = cb.record("user_message", session_id="sD", text=KEY).id
    for i in range(fillers):
        cb.record("user_message", session_id="sD", text=f"filler turn {i} about lunch menus")
    cb.wait_for_embeddings()
    return key


def test_a_turn_older_than_the_window_is_recalled_by_memory(cb: ContextBase) -> None:
    key = _session(cb, 25)  # the default window holds the last 20 messages
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="when is the payments deploy window", session_id="sD"
    )
    assert "Tuesday 03:00" in json.dumps(ctx.messages, ensure_ascii=False)
    dropped = [d for d in ctx.trace["dropped"] if d["id"] == key]
    assert all(d["reason"] != "in history" for d in dropped), dropped


def test_a_turn_the_window_shows_is_not_recalled_again(cb: ContextBase) -> None:
    key = _session(cb, 3)
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="when is the payments deploy window", session_id="sD"
    )
    assert json.dumps(ctx.messages, ensure_ascii=False).count("Tuesday 03:00") == 1
    assert any(d["id"] == key and d["reason"] == "in history" for d in ctx.trace["dropped"])


def test_a_window_turn_past_the_history_quota_is_recalled_by_memory(cb: ContextBase) -> None:
    key = cb.record("user_message", session_id="sQ", text=KEY).id
    filler = " ".join(f"lunch menu item {i} with soup and bread" for i in range(40))
    for _ in range(4):  # long turns: the history quota holds the newest only
        cb.record("user_message", session_id="sQ", text=filler)
    cb.wait_for_embeddings()
    ctx = cb.assemble_context(
        agent_role="coder",
        user_intent="when is the payments deploy window",
        session_id="sQ",
        max_tokens=1500,
    )
    text = json.dumps(ctx.messages, ensure_ascii=False)
    assert text.count("Tuesday 03:00") == 1, ctx.trace["dropped"]  # once: memory recalls it
    assert not [d for d in ctx.trace["dropped"] if d["id"] == key and d["reason"] == "in history"]
