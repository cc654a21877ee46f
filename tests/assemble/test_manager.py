"""ContextManager: seed 003's operations, explicit lifecycles, task scoping and expiry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxbase
from ctxbase import ContextBase
from ctxbase.assemble.assembler import Assembler
from ctxbase.assemble.facts import RuleFactExtractor
from ctxbase.assemble.lifecycle import IllegalTransition, Status
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.trace import get_trace
from ctxbase.errors import ConflictError, NotFoundError, ValidationError


@pytest.fixture
def cb(tmp_path: Path) -> Iterator[ContextBase]:
    base = ctxbase.open(str(tmp_path / "x.db"), project="p", embedder="hash")
    yield base
    base.close()


@pytest.fixture
def cm(cb: ContextBase) -> ContextManager:
    return ContextManager(cb, extractor=RuleFactExtractor())


def _text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def test_session_lifecycle_is_explicit_and_logged(cm: ContextManager) -> None:
    sid = cm.create_session("alice")
    assert cm.session_status(sid) == Status.ACTIVE
    cm.suspend_session(sid)
    cm.resume_session(sid)
    log = cm.session(sid).metadata["status_log"]
    assert [(e["from"], e["to"]) for e in log] == [
        ("", "created"),
        ("created", "active"),
        ("active", "suspended"),
        ("suspended", "active"),
    ]
    cm.add_message(sid, "user", "我们聊聊活动方案")
    summary = cm.archive_session(sid)
    assert "活动方案" in summary
    assert cm.session_status(sid) == Status.ARCHIVED
    with pytest.raises(IllegalTransition, match="archived -> active"):
        cm.resume_session(sid)
    with pytest.raises(ConflictError, match="archived"):
        cm.add_message(sid, "user", "还在吗")
    with pytest.raises(ConflictError, match="archived"):
        cm.get_prompt_messages(sid)


def test_switch_task_suspends_the_old_one_and_scopes_messages_and_state(
    cm: ContextManager,
) -> None:
    sid = cm.create_session()
    plan = cm.switch_task(sid, "写一个618活动方案")
    cm.add_message(sid, "user", "把预算控制在5万以内")
    cm.add_message(sid, "assistant", "好的，活动方案预算5万以内。")
    assert cm.get_state(sid, "budget") == {"op": "<=", "amount": 50000, "currency": "CNY"}

    logs = cm.switch_task(sid, "查看昨天的日志")
    assert cm.task(plan).status == Status.SUSPENDED
    assert cm.task(logs).status == Status.ACTIVE
    assert cm.get_state(sid, "budget") is None  # the new task has its own facts
    cm.add_message(sid, "user", "昨天的错误日志有哪些")
    prompt = cm.get_prompt_messages(sid, 1500)
    assert "活动方案预算" not in _text(prompt)
    assert prompt[-1] == {"role": "user", "content": "昨天的错误日志有哪些"}
    assert "Current task:\n- goal: 查看昨天的日志" in _text(prompt)

    assert cm.switch_task(sid, "", task_id=plan) == plan  # resume
    assert cm.task(plan).status == Status.ACTIVE
    assert cm.task(logs).status == Status.SUSPENDED
    assert cm.get_state(sid, "budget") is not None
    with pytest.raises(IllegalTransition):
        cm.set_task_status(plan, "active")
    # switching back by the goal returns to the suspended task, its facts with it
    assert cm.switch_task(sid, "查看昨天的日志") == logs
    assert cm.task(logs).status == Status.ACTIVE and cm.get_state(sid, "budget") is None
    assert cm.switch_task(sid, "写一个618活动方案") == plan
    assert cm.get_state(sid, "budget") is not None
    assert cm.switch_task(sid, "写一个618活动方案") == plan  # current already: no change
    assert len(cm.cb.store.list_tasks(cm.project, sid)) == 2


def test_state_is_known_to_the_next_turn(cm: ContextManager) -> None:
    sid = cm.create_session()
    cm.switch_task(sid, "活动策划")
    cm.add_message(sid, "user", "把预算控制在5万以内")
    cm.add_message(sid, "assistant", "明白。")
    cm.add_message(sid, "user", "那时间呢")
    prompt = cm.get_prompt_messages(sid, 1000)
    roles = [m["role"] for m in prompt]
    assert roles[0] == "system" and roles[-1] == "user"
    facts = next(m["content"] for m in prompt if m["content"].startswith("Known facts:"))
    assert "budget <= 50000 CNY" in facts
    assert prompt.index(next(m for m in prompt if m["content"] == facts)) < len(prompt) - 2
    assert prompt[-1]["content"] == "那时间呢"
    assert cm.state_history(sid, "budget")[0].new_value["amount"] == 50000


def test_state_rollback_through_the_manager(cm: ContextManager) -> None:
    sid = cm.create_session()
    cm.set_state(sid, "color", "blue")  # no task: kept at session scope
    cm.set_state(sid, "color", "red")
    cm.rollback_state(sid, "color", 1)
    assert cm.get_state(sid, "color") == "blue"
    assert [c.new_value for c in cm.state_history(sid, "color")] == ["blue", "red", "blue"]
    with pytest.raises(NotFoundError) as err:  # the id stays the id; the versions follow it
        cm.rollback_state(sid, "color", 99)
    assert err.value.item_id == "color@v99"
    assert "state version 'color@v99' not found (its versions: 1, 2, 3)" in str(err.value)


def test_expired_message_never_appears_again(cb: ContextBase, cm: ContextManager) -> None:
    sid = cm.create_session()
    wrong = cm.add_message(sid, "user", "收货地址是北京市海淀区")
    cm.add_message(sid, "assistant", "好的")
    cm.expire_message(sid, wrong)
    assert cm.message_status(sid, wrong) == Status.EXPIRED
    with pytest.raises(IllegalTransition):
        cm.expire_message(sid, wrong)
    cm.add_message(sid, "user", "地址写在哪了")
    ctx = Assembler(cb).assemble(session_id=sid, agent_role="assistant", user_intent="地址写在哪了")
    assert "海淀" not in _text(ctx.messages)
    dropped = get_trace(cb, ctx.context_id)["dropped"]
    assert {"id": wrong, "reason": "retracted"}.items() <= next(
        d for d in dropped if d["id"] == wrong
    ).items()


def test_the_status_of_an_unknown_message_is_not_found(cm: ContextManager) -> None:
    sid = cm.create_session()
    said = cm.add_message(sid, "user", "预算5万")
    assert cm.message_status(sid, said) == Status.ACTIVE
    other = cm.create_session()
    # a typo, or another session's message, must not read as a live message
    for session, message in ((sid, "ev_nope"), (other, said)):
        with pytest.raises(NotFoundError) as err:
            cm.message_status(session, message)
        assert err.value.item_id == message and "message" in str(err.value)
    with pytest.raises(NotFoundError):
        cm.message_status("no-such-session", said)


def test_per_turn_tool_results_expire_after_the_next_turn(cm: ContextManager) -> None:
    sid = cm.create_session()
    cm.add_message(sid, "user", "查下库存")
    tool = cm.add_message(sid, "tool", "SKU-42 库存 17 件", per_turn=True)
    this_turn = cm.get_prompt_messages(sid, 800)
    assert "SKU-42 库存 17 件" in _text(this_turn)
    assert f"[tool result {tool}]" in _text(this_turn)
    cm.add_message(sid, "assistant", "还有17件。")
    cm.add_message(sid, "user", "帮我写首诗")
    assert cm.message_status(sid, tool) == Status.EXPIRED
    assert "SKU-42" not in _text(cm.get_prompt_messages(sid, 800))


def test_a_user_message_is_by_the_sessions_user(cb: ContextBase, cm: ContextManager) -> None:
    """A timeline by agent tells the users of sessions apart (as capture_messages does);
    a user id that is no valid id (free text) leaves the default agent."""
    alice = cm.create_session("alice")
    said = cm.add_message(alice, "user", "the budget is 50k")
    answered = cm.add_message(alice, "assistant", "noted: 50k")
    named = cm.create_session("Alice Chen <alice@example.com>")
    other = cm.add_message(named, "user", "hello")
    by = {e.id: e.agent_id for e in cb.store.get_events(cm.project, [said, answered, other])}
    assert by[said] == "alice"
    assert by[answered] != "alice"
    assert by[other] == "agent"


def test_a_task_just_switched_to_is_prompted_with_its_goal(cm: ContextManager) -> None:
    sid = cm.create_session("u1")
    cm.switch_task(sid, "写活动方案")
    cm.add_message(sid, "user", "把预算控制在5万以内")
    cm.add_message(sid, "assistant", "好的")
    cm.switch_task(sid, "查日志")  # the new task has no user message yet
    messages = cm.get_prompt_messages(sid, max_tokens=3000)
    assert messages[-1] == {"role": "user", "content": "查日志"}
    assert "goal: 查日志" in _text(messages)
    # a new session has neither a message nor a task: the error says what to pass
    with pytest.raises(ValidationError) as err:
        cm.get_prompt_messages(cm.create_session("u2"))
    assert err.value.field == "user_input"
    assert "the session has no user message yet; pass user_input" in str(err.value)


def test_a_message_that_is_no_text_is_refused_by_name(cm: ContextManager) -> None:
    sid = cm.create_session("u1")
    for bad, why in ((5, "must be a string (got int)"), (None, "is missing")):
        with pytest.raises(ValidationError) as err:
            cm.add_message(sid, "user", bad)  # type: ignore[arg-type]
        assert err.value.field == "content" and why in str(err.value)
    assert cm.cb.store.list_events(cm.project, sid) == []  # nothing stored


def test_retracting_one_of_two_messages_stating_a_value_keeps_it(cm: ContextManager) -> None:
    sid = cm.create_session("u1")
    cm.switch_task(sid, "t")
    first = cm.add_message(sid, "user", "把预算控制在5万以内")
    again = cm.add_message(sid, "user", "预算还是控制在5万以内")  # the same value, restated
    cm.expire_message(sid, first)
    assert cm.get_state(sid, "budget") == {"op": "<=", "amount": 50000, "currency": "CNY"}
    cm.expire_message(sid, again)  # no message states it now
    assert cm.get_state(sid, "budget") is None


def test_manager_inputs_are_checked_as_their_writes_are(cm: ContextManager) -> None:
    for user in ("", "  ", None, 42):
        with pytest.raises(ValidationError) as err:
            cm.create_session(user)  # type: ignore[arg-type]
        assert err.value.field == "user_id" and "must be a non-empty string" in str(err.value)
    sid = cm.create_session("u1")
    with pytest.raises(ValidationError) as err:
        cm.get_state(sid, "")  # as set_state refuses it, not an unset fact
    assert err.value.field == "key"
    task = cm.switch_task(sid, "a")
    other = cm.create_session("u2")
    with pytest.raises(NotFoundError):
        cm.add_message(sid, "user", "x", task_id="t_nope")
    with pytest.raises(ValidationError) as err:
        cm.add_message(other, "user", "x", task_id=task)
    assert err.value.field == "task_id" and "is not of session" in str(err.value)
    assert cm.add_message(sid, "user", "x", task_id=task).startswith("ev_")


def test_a_prompt_of_a_session_whose_user_messages_are_retracted_says_so(
    cb: ContextBase,
) -> None:
    cm = cb.context_manager()
    sid = cm.create_session("u1")
    told = cm.add_message(sid, "user", "The deadline is Friday")
    cm.add_message(sid, "assistant", "OK")
    cm.expire_message(sid, told)
    with pytest.raises(ValidationError) as err:
        cm.get_prompt_messages(sid, max_tokens=3000)
    assert err.value.field == "user_input"
    assert f"user messages (1) are retracted, the last {told}" in str(err.value)
    assert cm.get_prompt_messages(sid, max_tokens=3000, user_input="what now?")[-1] == {
        "role": "user",
        "content": "what now?",
    }
