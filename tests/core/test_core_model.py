"""The data model: event ids (fresh per capture, or keyed for retries), event types and
priorities, stored fields."""

from __future__ import annotations

import time

import pytest

import ctxbase
from ctxbase import ContextBase, Priority, ValidationError
from ctxbase.model import (
    BUILTIN_EVENT_TYPES,
    event_priority,
    is_event_type,
    keyed_event_id,
    new_event_id,
    relation_id_for,
)


def test_new_event_ids_are_unique_and_in_creation_order() -> None:
    ids = [new_event_id() for _ in range(5000)]  # many fall in the same millisecond
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert all(i.startswith("ev_") and len(i) == 35 for i in ids)
    # the leading 48 bits are the capture time in milliseconds
    ms = int(ids[0][3:15], 16)
    assert abs(ms - time.time() * 1000) < 60_000


def test_keyed_event_id_depends_on_project_session_and_key_only() -> None:
    base = keyed_event_id("p", "s", "k1")
    assert base == keyed_event_id("p", "s", "k1")
    variants = [keyed_event_id("q", "s", "k1"), keyed_event_id("p", "t", "k1")]
    variants.append(keyed_event_id("p", "s", "k2"))
    assert len({base, *variants}) == 4
    assert base.startswith("ev_")


def test_capture_gives_every_call_a_new_id_unless_it_is_a_keyed_retry(
    cb: ContextBase,
) -> None:
    a = cb.capture("user_message", session_id="s", text="same")
    b = cb.capture("user_message", session_id="s", text="same")
    assert a != b
    k1 = cb.capture("user_message", session_id="s", text="same", idempotency_key="turn-1")
    k2 = cb.capture("user_message", session_id="s", text="same", ts=5.0, idempotency_key="turn-1")
    k3 = cb.capture("user_message", session_id="other", text="same", idempotency_key="turn-1")
    assert k1 == k2 == keyed_event_id("p", "s", "turn-1")
    assert k3 != k1
    own = new_event_id()
    assert cb.capture("user_message", session_id="s", text="x", event_id=own) == own


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"event_id": "not-prefixed"}, "event_id"),
        ({"event_id": "ev_bad id"}, "event_id"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"idempotency_key": "   "}, "idempotency_key"),
        ({"idempotency_key": "k" * 256}, "idempotency_key"),
        ({"idempotency_key": 7}, "idempotency_key"),
        ({"idempotency_key": "k", "event_id": "ev_1"}, "idempotency_key"),
    ],
)
def test_bad_event_ids_and_keys_name_their_field(
    cb: ContextBase, fields: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as exc:
        cb.capture("user_message", session_id="s", text="x", **fields)
    assert exc.value.field == field


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


def test_register_event_type_takes_a_priority_by_name_and_refuses_others() -> None:
    ctxbase.register_event_type("plan_step_named", "high")
    assert event_priority("plan_step_named") == Priority.HIGH
    with pytest.raises(ValidationError) as exc:
        ctxbase.register_event_type("plan_step_urgent", "urgent")
    assert exc.value.field == "priority"
    assert "must be one of low (0), normal (1), high (2) (got 'urgent')" in str(exc.value)
    assert not is_event_type("plan_step_urgent")


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
