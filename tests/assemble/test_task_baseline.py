"""A task's first turn loads the role's baseline (seed 000: project_scope_fallback "保证新任务
不脱离项目基线") although the task has no history and whatever its intent says; once the
task has turns, the strategy's own triggers decide again. On every backend."""

from __future__ import annotations

from ctxbase import ContextBase
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.policy_loading import load_default_policies
from ctxbase.assemble.task_cues import new_task, with_task_baseline

BACK = "what about the signup endpoint from earlier"  # points back: no fallback trigger


def _project(cb: ContextBase) -> tuple[ContextManager, str]:
    cb.upsert_entity(
        "document",
        "Redis 规范 V3.2",
        "缓存键必须带业务前缀，过期不超过 300 秒。",
        id="document_101",
    )
    cb.upsert_entity(
        "requirement",
        "订单查询接口",
        "订单查询接口按用户 ID 分页，缓存 5 分钟。",
        id="requirement_201",
    )
    cm = ContextManager(cb)
    sid = cm.create_session(session_id="s1")
    cm.switch_task(sid, "订单查询接口", task_id="t1")
    for i in range(6):
        cm.add_message(sid, "user", f"signup endpoint draft {i}: email check and password hash")
        cm.add_message(sid, "assistant", f"signup endpoint step {i} done with bcrypt")
    for i in range(12):
        cb.record("user_message", session_id=f"o{i}", text=f"signup endpoint question {i}")
    return cm, sid


def _baseline(cb: ContextBase, sid: str, task: str, intent: str) -> tuple[set[str], list[str]]:
    ctx = cb.assemble_context(agent_role="coder", user_intent=intent, session_id=sid, task_id=task)
    brought = {
        c["id"]
        for c in ctx.trace["candidates"]
        if c["included"] and "project_scope_fallback" in c["strategies"]
    }
    return brought, list(ctx.trace["reasons"])


def test_a_new_task_loads_the_baseline_whatever_its_intent(cb: ContextBase) -> None:
    cm, sid = _project(cb)
    # the old task's turns point back: the fallback does not trigger there
    brought, _ = _baseline(cb, sid, "t1", BACK)
    assert brought == set()
    cm.switch_task(sid, "用户注册接口", task_id="t2")
    cm.add_message(sid, "user", BACK)  # the new task's first question, not answered yet
    brought, reasons = _baseline(cb, sid, "t2", BACK)
    assert {"document_101", "requirement_201"} <= brought
    assert any("task 't2' has no history yet" in r for r in reasons)
    # the manager's own prompt for the session's current task carries them too
    prompt = "\n".join(m["content"] for m in cm.get_prompt_messages(sid, agent_role="coder"))
    assert "Redis 规范 V3.2" in prompt and "订单查询接口" in prompt
    # answered: the task has a turn, and the intent's triggers decide again
    cm.add_message(sid, "assistant", "the signup endpoint checks the email first")
    brought, reasons = _baseline(cb, sid, "t2", BACK)
    assert brought == set()
    assert not any("has no history yet" in r for r in reasons)


def test_new_task_reads_the_session_and_a_policy_without_the_fallback_is_unchanged(
    cb: ContextBase,
) -> None:
    _, sid = _project(cb)
    events = cb.store.list_events(cb.project, sid)
    assert not new_task(cb.store, cb.project, sid, "t1", events, None)
    assert new_task(cb.store, cb.project, sid, "t9", events, None)
    assert not new_task(cb.store, cb.project, sid, None, events, None)
    first = events[0]
    assert new_task(cb.store, cb.project, sid, "t1", [first], first.id)  # only the input
    # no session given: the store is asked
    assert not new_task(cb.store, cb.project, None, "t1", [], None)
    assert new_task(cb.store, cb.project, None, "t9", [], None)
    policies = load_default_policies()
    tester = policies.select(cb.project, "tester", BACK)
    assert with_task_baseline(tester, "t9") == tester  # lists no project_scope_fallback
    coder = policies.select(cb.project, "coder", BACK)
    assert "project_scope_fallback" not in coder.strategy_names
    assert "project_scope_fallback" in with_task_baseline(coder, "t9").strategy_names
