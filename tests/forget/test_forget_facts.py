"""Forgetting facts (on SQLite and PostgreSQL): a soft delete keeps the old values in the
fact's history, so a rollback brings one back; a hard one (by key, or with a hard-forgotten
session) removes the history too, so no forgotten value can be read back or rolled back.
The `forget` tool's answer always says which facts it deleted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.errors import NotFoundError
from ctxbase.integrations.tools import ToolScope, handle_tool_call

SECRET_V1 = "the vault token is tok-1111"
SECRET_V2 = "the vault token is tok-2222"


def call(scope: ToolScope, name: str, arguments: dict[str, Any]) -> Any:
    return json.loads(handle_tool_call(scope, name, arguments))


def _values(cb: ContextBase, key: str, scope_id: str, scope: str) -> list[object]:
    history = cb.fact_history(key, scope_id=scope_id, scope=scope)  # type: ignore[arg-type]
    return [v for h in history for v in (h.old_value, h.new_value) if v is not None]


def test_a_soft_delete_keeps_the_history_and_a_hard_one_removes_it(cb: ContextBase) -> None:
    cb.set_fact("token", SECRET_V1, scope_id="t1")
    cb.set_fact("token", SECRET_V2, scope_id="t1")
    cb.set_fact("region", "eu-west-1", scope_id="t1")
    assert cb.delete_fact("token", scope_id="t1") is True
    assert SECRET_V1 in _values(cb, "token", "t1", "task")  # soft: a rollback brings it back
    assert cb.rollback_fact("token", 1, scope_id="t1") is not None
    assert cb.get_facts(scope_id="t1")["token"].value == SECRET_V1
    assert cb.delete_fact("token", scope_id="t1", hard=True) is True
    assert "token" not in cb.get_facts(scope_id="t1")
    assert cb.fact_history("token", scope_id="t1") == []
    with pytest.raises(NotFoundError):
        cb.rollback_fact("token", 1, scope_id="t1")
    # the scope's other fact keeps its value and its history
    assert cb.get_facts(scope_id="t1")["region"].value == "eu-west-1"
    assert len(cb.fact_history("region", scope_id="t1")) == 1
    assert cb.delete_fact("token", scope_id="t1", hard=True) is False  # nothing left


def test_a_hard_delete_removes_what_a_soft_delete_left_in_the_history(cb: ContextBase) -> None:
    cb.set_fact("token", SECRET_V1, scope_id=cb.project, scope="project")
    cb.delete_fact("token", scope_id=cb.project, scope="project")
    assert cb.delete_fact("token", scope_id=cb.project, scope="project", hard=True) is True
    assert cb.fact_history("token", scope_id=cb.project, scope="project") == []


def test_the_forget_tool_hard_by_key_removes_the_history(cb: ContextBase) -> None:
    writer = ToolScope(cb, agent_id="claude", role="write")
    admin = ToolScope(cb, agent_id="claude", role="admin")
    fact = {"fact_key": "token", "session_id": "s1"}
    call(writer, "remember", {"text": SECRET_V1, **fact})
    call(writer, "remember", {"text": SECRET_V2, **fact})
    refused = call(writer, "forget", {"fact_keys": ["token"], "session_id": "s1", "hard": True})
    assert refused["error"]["code"] == "forbidden", refused
    assert cb.get_facts(scope_id="s1", scope="session")["token"].value == SECRET_V2
    gone = call(admin, "forget", {"fact_keys": ["token"], "session_id": "s1", "hard": True})
    assert gone == {"facts_deleted": ["token"], "facts_not_found": []}
    assert cb.fact_history("token", scope_id="s1", scope="session") == []
    again = call(admin, "forget", {"fact_keys": ["token"], "session_id": "s1", "hard": True})
    assert again["error"]["code"] == "not_found", again
    # a soft forget by key keeps the history: the value can be rolled back
    call(writer, "remember", {"text": "blue", "fact_key": "colour", "session_id": "s1"})
    soft = call(writer, "forget", {"fact_keys": ["colour"], "session_id": "s1"})
    assert soft == {"facts_deleted": ["colour"], "facts_not_found": []}
    assert cb.rollback_fact("colour", 1, scope_id="s1", scope="session") is not None


def test_a_hard_session_forget_removes_its_facts_history(cb: ContextBase) -> None:
    writer = ToolScope(cb, agent_id="claude", role="write")
    admin = ToolScope(cb, agent_id="claude", role="admin")
    for text in (SECRET_V1, SECRET_V2):
        call(writer, "remember", {"text": text, "fact_key": "token", "session_id": "s2"})
    call(writer, "remember", {"text": "we deploy on Fridays", "session_id": "s2"})
    done = call(admin, "forget", {"session_id": "s2", "hard": True})
    assert done["facts_deleted"] == ["token"], done
    assert done["removed"]["state_history"] == 2, done
    assert cb.fact_history(scope_id="s2", scope="session") == []
    # a soft session forget deletes the facts and keeps their history (restorable)
    call(writer, "remember", {"text": "v1", "fact_key": "plan", "session_id": "s3"})
    soft = call(writer, "forget", {"session_id": "s3"})
    assert soft["facts_deleted"] == ["plan"], soft
    assert cb.rollback_fact("plan", 1, scope_id="s3", scope="session") is not None


def test_a_session_whose_facts_were_deleted_is_still_hard_forgettable(cb: ContextBase) -> None:
    cb.set_fact("token", SECRET_V1, scope_id="lonely", scope="session")
    cb.delete_fact("token", scope_id="lonely", scope="session")  # only the history holds it
    report = cb.forget(session_id="lonely")
    assert report.not_found == [] and report.removed.get("state_history") == 2
    assert cb.fact_history(scope_id="lonely", scope="session") == []


def test_the_forget_report_always_names_the_facts_deleted(cb: ContextBase) -> None:
    writer = ToolScope(cb, agent_id="claude", role="write")
    admin = ToolScope(cb, agent_id="claude", role="admin")
    event_id = call(writer, "remember", {"text": "a note", "session_id": "s4"})["event_id"]
    assert call(writer, "forget", {"event_ids": [event_id]})["facts_deleted"] == []
    assert call(writer, "forget", {"session_id": "s4"})["facts_deleted"] == []
    assert call(admin, "forget", {"session_id": "s4", "hard": True})["facts_deleted"] == []


def test_a_hard_delete_leaves_no_value_of_the_fact_in_stored_traces(cb: ContextBase) -> None:
    """A trace of an assembly that showed the fact keeps the assembly (other items stay
    readable) but none of the values the fact held, current or past."""
    cb.record("user_message", session_id="s9", text="what is the vault token for the deploy")
    cb.set_fact("token", SECRET_V1, scope_id="s9", scope="session")
    cb.set_fact("token", SECRET_V2, scope_id="s9", scope="session")
    cb.set_fact("region", "region eu-west-1", scope_id="s9", scope="session")
    ctx = cb.assemble_context(
        agent_role="coder", user_intent="what is the vault token", session_id="s9"
    )
    before = json.dumps(cb.get_trace(ctx.context_id), ensure_ascii=False)
    assert SECRET_V2 in before and "state:session:s9:token" in before
    assert cb.delete_fact("token", scope_id="s9", scope="session", hard=True) is True
    after = json.dumps(cb.get_trace(ctx.context_id), ensure_ascii=False)
    assert SECRET_V2 not in after and SECRET_V1 not in after and "tok-2222" not in after
    assert "region eu-west-1" in after  # the scope's other fact is still shown
    # a soft delete keeps the value where a rollback can read it: the trace keeps it too
    ctx2 = cb.assemble_context(
        agent_role="coder", user_intent="which region do we deploy to", session_id="s9"
    )
    assert cb.delete_fact("region", scope_id="s9", scope="session") is True
    assert "region eu-west-1" in json.dumps(cb.get_trace(ctx2.context_id), ensure_ascii=False)


def _budget_session(cb: ContextBase, first: int, then: int) -> tuple[Any, str, str, str]:
    cm = cb.context_manager()
    sid = cm.create_session("u9")
    cm.switch_task(sid, "trip")
    m0 = cm.add_message(sid, "user", f"Keep the budget under {first} dollars.")
    m1 = cm.add_message(sid, "user", f"Actually raise the budget to under {then} dollars.")
    cb.flush()
    return cm, sid, m0, m1


def _amounts(cb: ContextBase, cm: Any, sid: str) -> list[object]:
    task = cm.current_task(sid).id
    return [
        v["amount"] for h in cb.fact_history(scope_id=task) for v in (h.old_value, h.new_value) if v
    ]


@pytest.mark.parametrize("which", ["earlier", "later", "hidden then purged"])
def test_a_forgotten_message_takes_only_its_own_value_of_a_fact(
    cb: ContextBase, which: str
) -> None:
    cm, sid, m0, m1 = _budget_session(cb, 48213, 59371)
    gone, stays, left = (m0, m1, 59371) if which == "earlier" else (m1, m0, 48213)
    lost = 48213 if which == "earlier" else 59371
    if which == "hidden then purged":
        cb.soft_delete([gone])
        cb.purge_soft_deleted(0)
    else:
        cb.forget(event_ids=[gone])
    # the message still visible still states its value: the fact keeps it
    assert cm.get_state(sid, "budget")["amount"] == left
    assert _amounts(cb, cm, sid) == [left]  # and no forgotten value stays in its history
    assert lost not in _amounts(cb, cm, sid)
    prompt = json.dumps(cm.get_prompt_messages(sid, max_tokens=2000, user_input="budget?"))
    assert str(left) in prompt and str(lost) not in prompt
    # forgetting the message that states it now takes the fact with it
    cb.forget(event_ids=[stays])
    assert cm.get_state(sid, "budget") is None
    assert cb.fact_history(scope_id=cm.current_task(sid).id) == []


def test_a_fact_set_by_the_caller_keeps_its_value_when_a_message_goes(cb: ContextBase) -> None:
    cm, sid, m0, m1 = _budget_session(cb, 48213, 59371)
    cm.set_state(sid, "budget", {"op": "<=", "amount": 50000, "currency": "USD"})
    cb.forget(event_ids=[m0, m1])
    assert cm.get_state(sid, "budget")["amount"] == 50000
    assert _amounts(cb, cm, sid) == [50000]


def test_a_value_restated_by_another_message_stays_while_that_one_does(cb: ContextBase) -> None:
    cm = cb.context_manager()
    first = cm.create_session("alice")
    cm.add_message(first, "user", "我喜欢简洁的回答。")
    second = cm.create_session("alice")
    cm.add_message(second, "user", "我喜欢简洁的回答，用中文。")
    cb.flush()
    history = cb.fact_history(scope="user", scope_id="alice")
    assert [h.cause.split(" ")[0] for h in history if h.cause] == ["extracted", "restated"]
    cb.forget(session_id=first)  # the second session still states the preference
    facts = cb.get_facts(scope="user", scope_id="alice")
    assert facts["preference:简洁的回答"].value == {"polarity": "like", "item": "简洁的回答"}
    cb.forget(session_id=second)  # and with it, it goes
    assert cb.get_facts(scope="user", scope_id="alice") == {}
