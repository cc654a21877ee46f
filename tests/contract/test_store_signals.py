"""The state records feedback and memory use live in, on every backend: get_state_keys
reads the keys asked for in one call, add_uses adds to the stored counts without history,
and a forget of a node removes both (store.base.FEEDBACK_SCOPE, USES_SCOPE)."""

from __future__ import annotations

import logging

import pytest

from ctxbase import ContextBase
from ctxbase.model import Event, StateFact
from ctxbase.store.base import FEEDBACK_SCOPE, USES_SCOPE, Store
from store_calls import StoreCalls


def _feedback(project_id: str, key: str, label: str) -> StateFact:
    value = {"label": label, "confidence": 0.1}
    return StateFact(project_id=project_id, scope=FEEDBACK_SCOPE, scope_id="", key=key, value=value)


def test_get_state_keys_reads_only_the_keys_asked(store: Store, project_id: str) -> None:
    for n in range(5):
        store.set_state(_feedback(project_id, f"ev_{n}", "wrong"))
    store.set_state(_feedback(project_id + "-other", "ev_1", "liked"))  # another project
    calls = StoreCalls(store)
    asked = ["ev_1", "ev_3", "ev_none", "ev_1", *(f"x{n}" for n in range(900))]
    got = store.get_state_keys(project_id, FEEDBACK_SCOPE, "", asked)
    assert calls.every == {"get_state_keys": 1}
    assert sorted(got) == ["ev_1", "ev_3"]
    assert got["ev_1"].value == {"label": "wrong", "confidence": 0.1}
    assert store.get_state_keys(project_id, FEEDBACK_SCOPE, "", []) == {}
    assert store.get_state_keys(project_id, USES_SCOPE, "", ["ev_1"]) == {}


def test_add_uses_accumulates_without_history(store: Store, project_id: str) -> None:
    store.add_uses(project_id, {"ev_a": 2, "ev_b": 1}, at=100.0)
    store.add_uses(project_id, {"ev_a": 3}, at=200.0)
    store.add_uses(project_id, {}, at=300.0)  # nothing to add
    got = store.get_state_keys(project_id, USES_SCOPE, "", ["ev_a", "ev_b"])
    assert {k: (f.version, f.updated_at) for k, f in got.items()} == {
        "ev_a": (5, 200.0),
        "ev_b": (1, 100.0),
    }
    assert store.state_history(project_id, USES_SCOPE, "", "ev_a") == []
    assert project_id in store.list_projects()  # a project first seen here is made


def test_forget_removes_feedback_and_uses_of_the_node(store: Store, project_id: str) -> None:
    events = [
        Event(id=f"ev_{n}", project_id=project_id, session_id="s1", type="user_message",
              text=f"note {n}")
        for n in range(2)
    ]  # fmt: skip
    store.write_events(events, [[] for _ in events])
    for e in events:
        store.set_state(_feedback(project_id, e.id, "wrong"))
    store.add_uses(project_id, {"ev_0": 1, "ev_1": 4}, at=1.0)
    store.forget(project_id, event_ids=["ev_0"])
    assert list(store.get_state_keys(project_id, FEEDBACK_SCOPE, "", ["ev_0", "ev_1"])) == ["ev_1"]
    assert list(store.get_state_keys(project_id, USES_SCOPE, "", ["ev_0", "ev_1"])) == ["ev_1"]
    assert store.state_history(project_id, FEEDBACK_SCOPE, "", "ev_0") == []


def test_a_base_whose_store_was_closed_first_closes_quietly(
    cb: ContextBase, caplog: pytest.LogCaptureFixture
) -> None:
    """The uses an assembly noted cannot be written once the store is closed under the
    base: closing the base then warns of nothing (at interpreter exit the warning went to a
    closed stream as a logging error)."""
    cb.record("user_message", session_id="s1", text="orders cache ttl is 60 s")
    cb.assemble_context(agent_role="coder", user_intent="orders cache ttl")
    assert not cb.store.closed
    cb.store.close()
    assert cb.store.closed
    with caplog.at_level(logging.WARNING, logger="ctxbase"):
        cb.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
