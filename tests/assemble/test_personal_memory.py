"""Personal memory across sessions (seed 001's scenario 4): what a user says about
themselves reaches that user's new sessions as a fact, and never another user's."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.facts import RuleFactExtractor
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.state import get_facts


def _state_text(ctx: object) -> str:
    layer = ctx.trace["layers"].get("state") or {}  # type: ignore[attr-defined]
    return " ".join(str(i.get("text", "")) for i in layer.get("items", []))


def test_a_preference_follows_its_user_to_new_sessions_only(cb: ContextBase) -> None:
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    first = cm.create_session("alice", session_id="alice-1")
    cm.add_message(first, "user", "我喜欢蓝色")
    later = cm.create_session("alice", session_id="alice-2")
    other = cm.create_session("bob", session_id="bob-1")
    assembler = Assembler(cb)
    mine = assembler.assemble(session_id=later, agent_role="coder", user_intent="做一个登录按钮")
    assert "蓝色" in _state_text(mine)
    theirs = assembler.assemble(session_id=other, agent_role="coder", user_intent="做一个登录按钮")
    assert "蓝色" not in _state_text(theirs)
    assert get_facts(cb, scope="user", scope_id="alice")  # kept under the user
    assert not get_facts(cb, scope="session", scope_id=first)  # not under the session

    # forgetting the session that said it forgets the preference too
    report = cb.forget(session_id=first)
    assert report.removed.get("state", 0) >= 1
    assert not get_facts(cb, scope="user", scope_id="alice")
    again = assembler.assemble(session_id=later, agent_role="coder", user_intent="做一个登录按钮")
    assert "蓝色" not in _state_text(again)


def test_get_state_reads_the_preference_the_prompt_shows(cb: ContextBase) -> None:
    # seed 003: "用户说'我喜欢蓝色' ... 提取结构化事实写入状态层"; reading the state back must
    # give what the assembled prompt states, in the session and in the user's next one.
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("alice")
    cm.switch_task(sid, "设计登录页")
    cm.add_message(sid, "user", "我喜欢蓝色")
    liked = {"polarity": "like", "item": "蓝色"}
    assert cm.get_state(sid, "preference:蓝色") == liked
    assert cm.get_state(sid, "preference:蓝色", scope="user") == liked
    assert cm.get_state(sid, "preference:蓝色", scope="task") is None
    later = cm.create_session("alice")
    assert cm.get_state(later, "preference:蓝色") == liked
    assert cm.get_state(cm.create_session("bob"), "preference:蓝色") is None
    # a task's own fact still comes first, and the user scope is writable by name
    cm.set_state(sid, "preference:蓝色", {"polarity": "dislike", "item": "蓝色"})
    assert cm.get_state(sid, "preference:蓝色")["polarity"] == "dislike"
    cm.set_state(later, "timezone", "Asia/Shanghai", scope="user")
    assert get_facts(cb, scope="user", scope_id="alice")["timezone"].value == "Asia/Shanghai"
    assert cm.get_state(sid, "timezone") == "Asia/Shanghai"
