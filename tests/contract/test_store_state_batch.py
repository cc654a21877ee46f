"""get_states: the facts of several scopes in one read, the same as one get_state per scope,
on every backend."""

from __future__ import annotations

from ctxbase.model import StateFact
from ctxbase.store.base import Store
from store_calls import StoreCalls


def _fact(project_id: str, scope: str, scope_id: str, key: str, value: object) -> StateFact:
    return StateFact(project_id=project_id, scope=scope, scope_id=scope_id, key=key, value=value)


def test_get_states_matches_get_state_per_scope(store: Store, project_id: str) -> None:
    for fact in [
        _fact(project_id, "task", "t1", "budget", {"max": 50}),
        _fact(project_id, "task", "t1", "owner", "李"),
        _fact(project_id, "task", "t2", "budget", {"max": 70}),
        _fact(project_id, "session", "s1", "format", "csv"),
        _fact(project_id, "message", "s1", "ev-1", "expired"),
        _fact(project_id, "project", project_id, "region", "eu"),
        # the same scope ids in another project and a scope not asked for stay out
        _fact(project_id + "-other", "task", "t1", "budget", {"max": 1}),
        _fact(project_id, "user", "alice", "preference:color", "blue"),
    ]:
        store.set_state(fact)
    store.set_state(_fact(project_id, "task", "t1", "owner", "王"))  # version 2
    asked = [
        ("task", "t1"),
        ("session", "s1"),
        ("message", "s1"),
        ("project", project_id),
        ("task", "t2"),
        ("task", "none-such"),
        ("task", "t1"),  # asked twice: one key
    ]
    got = store.get_states(project_id, asked)
    assert list(got) == list(dict.fromkeys(asked))  # every pair, in the order asked
    for scope, scope_id in got:
        assert got[(scope, scope_id)] == store.get_state(project_id, scope, scope_id)
    assert [(f.key, f.value, f.version) for f in got[("task", "t1")]] == [
        ("budget", {"max": 50}, 1),
        ("owner", "王", 2),
    ]
    assert got[("task", "none-such")] == []
    assert store.get_states(project_id, []) == {}


def test_get_states_is_one_store_read(store: Store, project_id: str) -> None:
    """Many scopes (more than one statement's worth of pairs) answer in one call, and the
    backend does not fall back to one get_state per pair."""
    for n in range(3):
        store.set_state(_fact(project_id, "task", f"t{n}", "k", n))
    calls = StoreCalls(store)
    pairs = [("task", f"t{n}") for n in range(1000)]
    got = store.get_states(project_id, pairs)
    assert calls.every == {"get_states": 1}
    assert [f.value for f in got[("task", "t2")]] == [2]
    assert sum(len(v) for v in got.values()) == 3
    assert len(got) == 1000
