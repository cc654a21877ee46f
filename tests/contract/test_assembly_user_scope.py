"""Opt-in user-scoped memory on every backend (seed 003: Bob's "那时间呢" never gets Alice's
deadline): two users of one project ask with the same words; under `memory_scope="user"`
neither sees the other's turns, what was anchored from them or their session's facts,
while the user's own other sessions and knowledge of no session still come in. Without
it, memory stays shared across the project (the default)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.manager import ContextManager
from ctxbase.assemble.trace import explain_trace
from ctxbase.errors import ValidationError

QUESTION = "那时间呢？活动的截止时间是哪天"
ALICE_SAYS = "活动的截止时间定在3月15日"
ALICE_FACT = "截止日期是月底"
BOB_EARLIER = "活动的截止时间定在6月30日"
CAROL_SAYS = "活动的截止时间定在9月1日"
RULE = "活动截止时间规则：所有活动截止时间需提前两周公告"
ALICE_DECISION = "决定：活动截止时间改为3月20日"


def _text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def _project(cb: ContextBase) -> tuple[ContextManager, dict[str, str]]:
    """Alice's session, Bob's earlier and current ones (all by the manager), Carol's
    captured chat (no user recorded: her user turns name her), a rule of no session and a
    decision anchored from Alice's session."""
    cm = cb.context_manager()
    alice = cm.create_session("alice")
    cm.add_message(alice, "user", ALICE_SAYS)
    cm.add_message(alice, "assistant", "好的，活动截止时间是3月15日。")
    cm.add_message(alice, "user", ALICE_FACT)
    bob_1 = cm.create_session("bob")
    cm.add_message(bob_1, "user", BOB_EARLIER)
    cm.add_message(bob_1, "assistant", "好的，活动截止时间是6月30日。")
    cb.capture_messages(
        [
            {"role": "user", "content": CAROL_SAYS},
            {"role": "assistant", "content": "好的，活动截止时间是9月1日。"},
            {"role": "user", "content": QUESTION},  # Bob's question, word for word
            {"role": "assistant", "content": "9月1日。"},
        ],
        session_id="carol-chat",
        user_id="carol",
        sync=True,
    )
    cb.upsert_entity("document", "活动截止时间规则", RULE)
    cb.upsert_entity("decision", "截止时间决定", ALICE_DECISION, properties={"session_id": alice})
    bob_2 = cm.create_session("bob")
    cm.add_message(bob_2, "user", "我的预算控制在5万以内")
    cm.add_message(bob_2, "assistant", "好的，预算5万以内。")
    cb.flush()
    cb.wait_for_embeddings()
    return cm, {"alice": alice, "bob_1": bob_1, "bob_2": bob_2}


def _trace(cb: ContextBase, session_id: str) -> dict[str, Any]:
    newest = cb.store.list_traces(cb.project, session_id=session_id, limit=1)[0]
    return cb.get_trace(newest.context_id)


def test_user_scope_keeps_other_users_turns_facts_and_anchors_out(cb: ContextBase) -> None:
    _, sessions = _project(cb)
    bob = ContextManager(cb, memory_scope="user")
    prompt = _text(bob.get_prompt_messages(sessions["bob_2"], user_input=QUESTION))
    for other in ("3月15日", "3月20日", "9月1日", "月底"):  # Alice's and Carol's
        assert other not in prompt, prompt
    assert "6月30日" in prompt, prompt  # Bob's own earlier session
    assert RULE in prompt, prompt  # knowledge of no session stays shared
    trace = _trace(cb, sessions["bob_2"])
    assert (trace["memory_scope"], trace["user_id"]) == ("user", "bob")
    assert any(n.startswith("memory_scope user (user 'bob')") for n in trace["notes"])
    assert "view task, memory_scope user," in explain_trace(trace)
    # Carol's session has no user recorded: her turns are found, then left out by whose
    # session they are in (Alice's recorded sessions are out of the searches already)
    other = [d for d in trace["dropped"] if d["reason"] == "other user"]
    assert other and all("'carol-chat' is of another user" in d["detail"] for d in other)
    asked = cb.store.list_events(cb.project, "carol-chat", types=["user_message"])[-1]
    assert asked.text == QUESTION and asked.id in {d["id"] for d in other}
    alice = ContextManager(cb, memory_scope="user")
    prompt = _text(alice.get_prompt_messages(sessions["alice"], user_input=QUESTION))
    for other in ("6月30日", "9月1日", "预算"):  # Bob's and Carol's
        assert other not in prompt, prompt
    assert "3月15日" in prompt and "月底" in prompt and "3月20日" in prompt, prompt


def test_without_the_scope_memory_is_shared_across_users(cb: ContextBase) -> None:
    cm, sessions = _project(cb)
    prompt = _text(cm.get_prompt_messages(sessions["bob_2"], user_input=QUESTION))
    assert "3月15日" in prompt, prompt  # Alice's turn: the project shares memory
    assert "月底" not in prompt  # another session's facts are never in the state layer
    trace = _trace(cb, sessions["bob_2"])
    assert trace["memory_scope"] == "project" and "user_id" not in trace
    assert not any(n.startswith("memory_scope") for n in trace["notes"])
    assert "memory_scope" not in explain_trace(trace)


def test_a_policy_turns_the_scope_on_and_a_call_overrides_it(cb: ContextBase) -> None:
    _, sessions = _project(cb)
    from ctxbase.assemble.assembler import Assembler

    policies = "version: 1\npolicies:\n  - name: private\n    match: {default: true}\n"
    assembler = Assembler(cb, policies + "    memory_scope: user\n")
    kw: dict[str, Any] = {"session_id": sessions["bob_2"], "agent_role": "assistant"}
    scoped = _text(assembler.assemble(user_intent=QUESTION, **kw).messages)
    assert "3月15日" not in scoped and "6月30日" in scoped, scoped
    shared = assembler.assemble(user_intent=QUESTION, memory_scope="project", **kw)
    assert "3月15日" in _text(shared.messages)
    # a caller names the user: a project-level assembly of no session, as Carol
    as_carol = assembler.assemble(agent_role="assistant", user_intent=QUESTION, user_id="carol")
    text = _text(as_carol.messages)
    assert "9月1日" in text and "3月15日" not in text and "6月30日" not in text, text


def test_an_unknown_scope_is_refused(cb: ContextBase) -> None:
    with pytest.raises(ValidationError, match="memory_scope"):
        ContextManager(cb, memory_scope="team")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="memory_scope"):
        cb.assembler.assemble(agent_role="coder", user_intent="x", memory_scope="team")  # type: ignore[arg-type]


def test_the_user_scope_costs_the_sessions_read_and_one_per_unrecorded_session(
    cb: ContextBase,
) -> None:
    from store_calls import StoreCalls

    _, sessions = _project(cb)
    kw: dict[str, Any] = {"session_id": sessions["bob_2"], "agent_role": "assistant"}
    totals: dict[str, int] = {}
    for scope in ("project", "user"):
        cb.assembler.assemble(user_intent=QUESTION, memory_scope=scope, **kw)  # warm
        calls = StoreCalls(cb.store)
        cb.assembler.assemble(user_intent=QUESTION, memory_scope=scope, **kw)
        totals[scope] = calls.total()
        counts = dict(calls.counts)
    # the project's sessions once; Carol's chat (no user recorded) once when met
    assert counts.get("list_sessions") == 1, counts
    assert totals["user"] <= totals["project"] + 2, totals
