"""The storage contract, context terms: an event indexed with the words of the event it follows
loses those words while that event is hidden, gets them back when it is shown again, and
loses them for good when it is forgotten."""

from __future__ import annotations

import time

from contract_helpers import make_event, match

from ctxbase.retrieve.indexing import event_items
from ctxbase.store.base import Store


def _found(store: Store, project_id: str, query: str) -> list[str]:
    return [h.item_id for h in store.keyword_search(project_id, match(query), None, 9)]


def test_context_terms_follow_their_event(store: Store, project_id: str) -> None:
    a = make_event(project_id, "s1", "did you visit the lighthouse at zanzibar", ts=10.0)
    b = make_event(project_id, "s1", "yes last weekend with marguerite", ts=11.0)
    b_items = event_items(b, context=(a.id, a.text))
    assert [(it.context_id, "zanzibar" in it.context_terms) for it in b_items] == [(a.id, True)]
    store.write_events([a, b], [event_items(a), b_items])

    # B is found by a word only A's text has, and by its own words.
    assert set(_found(store, project_id, "zanzibar")) == {a.id, b.id}
    assert _found(store, project_id, "marguerite") == [b.id]

    # Hiding A hides its words in B's entry too; B stays findable by its own words.
    assert store.set_active(project_id, [a.id], False) == 1
    assert _found(store, project_id, "zanzibar") == []
    assert _found(store, project_id, "marguerite") == [b.id]

    # Showing A again brings them back.
    assert store.set_active(project_id, [a.id], True) == 1
    assert set(_found(store, project_id, "zanzibar")) == {a.id, b.id}

    # Forgetting A drops them from B's entry for good.
    store.forget(project_id, event_ids=[a.id])
    assert _found(store, project_id, "zanzibar") == []
    assert _found(store, project_id, "marguerite") == [b.id]
    (row,) = store.get_items(project_id, [b.id])
    assert row.context_terms == ""
    assert row.terms == b_items[0].terms


def test_latest_context_ids_by_role_and_task(store: Store, project_id: str) -> None:
    for context_id, role, task in (
        ("ctx-1", "code_gen", "t1"),
        ("ctx-2", "test_gen", "t1"),
        ("ctx-3", "code_gen", "t2"),
    ):
        store.put_trace(
            project_id,
            context_id,
            {"context_id": context_id, "agent_role": role, "task_id": task, "session_id": "s"},
        )
        time.sleep(0.01)  # created_at orders them
    roles = ["code_gen", "test_gen", "reviewer"]
    assert store.latest_context_ids(project_id, roles) == {
        "code_gen": "ctx-3",
        "test_gen": "ctx-2",
    }
    assert store.latest_context_ids(project_id, roles, task_id="t1") == {
        "code_gen": "ctx-1",
        "test_gen": "ctx-2",
    }
    assert store.latest_context_ids(project_id, roles, task_id="t9") == {}
    # an agent's aliases: the latest context of any of its role names is the agent's
    aliases = {"coder": ["code_gen"], "tester": ["test_gen", "qa"]}
    assert store.latest_context_ids(project_id, ["coder", "tester"], aliases=aliases) == {
        "coder": "ctx-3",
        "tester": "ctx-2",
    }
    assert store.latest_context_ids(project_id, ["coder"], task_id="t1", aliases=aliases) == {
        "coder": "ctx-1"
    }
    assert store.latest_context_ids(project_id, ["coder"]) == {}
    assert store.latest_context_ids("another-project", roles) == {}
