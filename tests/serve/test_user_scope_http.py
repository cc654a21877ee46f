"""memory_scope over a real server: `client.context_manager(memory_scope="user")` and
`assemble_context(memory_scope="user")` keep another user's turns out of the prompt, as
embedded (tests/contract/test_assembly_user_scope.py); left out, memory stays shared."""

from __future__ import annotations

import pytest
from live_server import Live

import ctxbase
from ctxbase.errors import ValidationError

QUESTION = "那时间呢？活动的截止时间是哪天"


def _text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def test_user_scope_over_rest(live: Live, pid: str) -> None:
    key = live.key(pid, role="write")
    with ctxbase.connect(live.url, api_key=key, project=pid) as client:
        shared = client.context_manager()
        alice = shared.create_session("alice")
        shared.add_message(alice, "user", "活动的截止时间定在3月15日")
        shared.add_message(alice, "assistant", "好的，活动截止时间是3月15日。")
        bob = shared.create_session("bob")
        shared.add_message(bob, "user", "我的预算控制在5万以内")
        shared.add_message(bob, "assistant", "好的，预算5万以内。")
        assert "3月15日" in _text(shared.get_prompt_messages(bob, user_input=QUESTION))
        private = client.context_manager(memory_scope="user")
        assert "3月15日" not in _text(private.get_prompt_messages(bob, user_input=QUESTION))
        role = {"agent_role": "assistant", "user_intent": QUESTION}
        ctx = client.assemble_context(session_id=bob, memory_scope="user", **role)
        assert (ctx.trace["memory_scope"], ctx.trace["user_id"]) == ("user", "bob")
        assert "3月15日" not in _text(ctx.messages)
        as_alice = client.assemble_context(user_id="alice", memory_scope="user", **role)
        assert "3月15日" in _text(as_alice.messages) and "预算" not in _text(as_alice.messages)
        with pytest.raises(ValidationError):
            client.context_manager(memory_scope="team")
        with pytest.raises(ValidationError):
            client.assemble_context(memory_scope="team", **role)
