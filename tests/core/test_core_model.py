"""The data model: deterministic event ids, event types and priorities, stored fields."""

from __future__ import annotations

import pytest

import ctxbase
from ctxbase import ContextBase, Priority, ValidationError
from ctxbase.model import (
    BUILTIN_EVENT_TYPES,
    event_id_for,
    event_priority,
    is_event_type,
    relation_id_for,
)


def test_event_id_is_a_hash_of_project_session_type_content_and_parents() -> None:
    base = event_id_for("p", "s", "user_message", "hello", None, ["ev_a", "ev_b"])
    assert base == event_id_for("p", "s", "user_message", "hello", None, ["ev_a", "ev_b"])
    # parent order does not matter; everything else does
    assert base == event_id_for("p", "s", "user_message", "hello", None, ["ev_b", "ev_a"])
    variants = [
        event_id_for("q", "s", "user_message", "hello", None, ["ev_a", "ev_b"]),
        event_id_for("p", "t", "user_message", "hello", None, ["ev_a", "ev_b"]),
        event_id_for("p", "s", "assistant_message", "hello", None, ["ev_a", "ev_b"]),
        event_id_for("p", "s", "user_message", "hello!", None, ["ev_a", "ev_b"]),
        event_id_for("p", "s", "user_message", "hello", {"k": 1}, ["ev_a", "ev_b"]),
        event_id_for("p", "s", "user_message", "hello", None, ["ev_a"]),
        event_id_for("p", "s", "user_message", "hello", None, []),
    ]
    assert len({base, *variants}) == len(variants) + 1
    assert base.startswith("ev_")


def test_capture_gives_the_same_id_for_the_same_event_whatever_the_timestamp(
    cb: ContextBase,
) -> None:
    a = cb.capture("user_message", session_id="s", text="same", ts=1.0, metadata={"x": 1})
    b = cb.capture("user_message", session_id="s", text="same", ts=2.0, metadata={"x": 2})
    c = cb.capture("user_message", session_id="other", text="same")
    assert a == b
    assert a != c


def test_relation_id_depends_on_the_triple_only() -> None:
    r = relation_id_for("p", "a", "USES", "b")
    assert r == relation_id_for("p", "a", "USES", "b")
    assert r != relation_id_for("p", "b", "USES", "a")
    assert r != relation_id_for("p", "a", "OWNS", "b")


def test_builtin_types_and_their_priorities() -> None:
    for name in (
        "user_message",
        "assistant_message",
        "system",
        "model_call",
        "tool_invocation",
        "tool_result",
        "internal_thought",
    ):
        assert is_event_type(name)
        assert name in BUILTIN_EVENT_TYPES
    assert event_priority("user_message") == Priority.HIGH
    assert event_priority("tool_result") == Priority.HIGH
    assert event_priority("internal_thought") == Priority.LOW
    assert event_priority("assistant_message") == Priority.NORMAL


def test_register_event_type_makes_a_new_type_capturable(cb: ContextBase) -> None:
    with pytest.raises(ValidationError) as exc:
        cb.record("plan_step_core", session_id="s", text="step 1")
    assert exc.value.field == "type"
    ctxbase.register_event_type("plan_step_core", Priority.LOW)
    assert event_priority("plan_step_core") == Priority.LOW
    ev = cb.record("plan_step_core", session_id="s", text="step 1")
    assert cb.get_event(ev.id).type == "plan_step_core"


@pytest.mark.parametrize("name", ["Bad", "1step", "", "has space", "x" * 65])
def test_register_event_type_refuses_bad_names(name: str) -> None:
    with pytest.raises(ValidationError) as exc:
        ctxbase.register_event_type(name)
    assert exc.value.field == "type"
    assert not is_event_type(name)


def test_every_event_field_round_trips_through_the_file(cb: ContextBase) -> None:
    parent = cb.record(
        "user_message", session_id="s1", text="find the bug", agent_id="u1", agent_role="user"
    )
    ev = cb.record(
        "tool_result",
        session_id="s1",
        text="3 failures",
        data={"failed": ["a", "b", "c"], "ok": 10, "nested": {"x": [1.5, None, True]}},
        agent_id="runner",
        agent_role="tester",
        task_id="t-1",
        parent_event_ids=[parent.id],
        importance=0.9,
        metadata={"path": "tests/x.py", "中文": "值"},
        ts=1234.5,
    )
    got = cb.get_event(ev.id)
    assert got.id == ev.id
    assert got.project_id == "p"
    assert got.session_id == "s1"
    assert got.task_id == "t-1"
    assert got.agent_id == "runner"
    assert got.agent_role == "tester"
    assert got.type == "tool_result"
    assert got.text == "3 failures"
    assert got.data == {"failed": ["a", "b", "c"], "ok": 10, "nested": {"x": [1.5, None, True]}}
    assert got.ts == 1234.5
    assert got.parent_event_ids == [parent.id]
    assert got.importance == 0.9
    assert got.metadata == {"path": "tests/x.py", "中文": "值"}
    assert got.active is True
    assert got.seq == 2


def test_data_only_event_and_text_only_event(cb: ContextBase) -> None:
    only_data = cb.record("model_call", session_id="s", data={"model": "m", "tokens": 12})
    assert cb.get_event(only_data.id).text is None
    assert cb.get_event(only_data.id).data == {"model": "m", "tokens": 12}
    with pytest.raises(ValidationError) as exc:
        cb.record("model_call", session_id="s")
    assert exc.value.field == "text"
