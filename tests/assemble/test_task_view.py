"""Seed 003's pollution case: two tasks of one session each say where they are; the default
view shows the current task's facts and the session's, never the other task's. A global view
is a role's explicit choice (planners)."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.assemble.facts import RuleFactExtractor
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.policy import Policy


def _text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def test_default_view_keeps_other_tasks_facts_out(cb: ContextBase) -> None:
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("alice")
    cm.set_state(sid, "user_tier", "vip", scope="session")
    a = cm.switch_task(sid, "帮我查一下上海天气")
    cm.set_state(sid, "location", "上海")
    cm.set_state(sid, "decision", "要带伞")
    cm.switch_task(sid, "北京天气怎么样")
    cm.set_state(sid, "location", "北京")
    prompt = _text(cm.get_prompt_messages(sid, 2000, user_input="北京天气怎么样"))
    assert "location: 北京" in prompt and "user_tier: vip" in prompt  # task + session
    assert "上海" not in prompt and "带伞" not in prompt  # task A's facts stay out
    ctx = cb.assemble_context(agent_role="assistant", user_intent="天气", session_id=sid)
    assert ctx.trace["view"] == "task" and "带伞" not in _text(ctx.messages)
    # a planner opts in to the global view: every task's facts, labelled with their task
    planner = _text(cm.get_prompt_messages(sid, 2000, agent_role="planner", user_input="汇总"))
    assert f"decision: 要带伞 (task {a})" in planner


def test_policies_default_to_the_task_view() -> None:
    assert Policy(name="x").view == "task"
