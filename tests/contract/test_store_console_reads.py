"""The storage contract for the console's reads: a page of a session's events, event
counts by agent and type, hidden events by session, entity counts by type, and the list
of stored assemblies.

Each test runs once per backend through the parametrised `store` fixture."""

from __future__ import annotations

from contract_helpers import add_entity, make_event, write

from ctxbase.store.base import EventCount, Store


def _session(store: Store, project_id: str, n: int) -> list[str]:
    agents = ("planner", "coder", "tester")
    types = ("user_message", "tool_invocation")
    events = [
        make_event(
            project_id,
            "s1",
            f"step {i}",
            ts=100.0 + i,
            agent_id=agents[i % 3],
            type=types[i % 2],
        )
        for i in range(n)
    ]
    write(store, *events)
    write(store, make_event(project_id, "s2", "elsewhere", ts=50.0))
    return [e.id for e in events]


def test_event_page_walks_forward_and_back(store: Store, project_id: str) -> None:
    ids = _session(store, project_id, 25)
    first = store.event_page(project_id, "s1", limit=10)
    assert [e.id for e in first] == ids[:10]
    assert [e.seq for e in first] == list(range(1, 11))
    second = store.event_page(project_id, "s1", after_seq=first[-1].seq, limit=10)
    assert [e.id for e in second] == ids[10:20]
    tail = store.event_page(project_id, "s1", after_seq=20, limit=10)
    assert [e.id for e in tail] == ids[20:]
    # back: the last `limit` before a seq, still in seq order
    back = store.event_page(project_id, "s1", before_seq=11, limit=4)
    assert [e.seq for e in back] == [7, 8, 9, 10]
    last = store.event_page(project_id, "s1", before_seq=10**9, limit=3)
    assert [e.id for e in last] == ids[-3:]
    window = store.event_page(project_id, "s1", after_seq=2, before_seq=6, limit=10)
    assert [e.seq for e in window] == [3, 4, 5]


def test_event_page_filters_and_hides_soft_deleted(store: Store, project_id: str) -> None:
    ids = _session(store, project_id, 12)
    store.set_active(project_id, [ids[1]], False)
    coder = store.event_page(project_id, "s1", agent_ids=["coder"], limit=100)
    assert [e.id for e in coder] == [ids[i] for i in (4, 7, 10)]  # ids[1] is hidden
    tools = store.event_page(project_id, "s1", types=["tool_invocation"], limit=2)
    assert [e.id for e in tools] == [ids[3], ids[5]]
    both = store.event_page(
        project_id, "s1", agent_ids=["planner", "tester"], types=["user_message"], limit=100
    )
    assert [e.id for e in both] == [ids[i] for i in (0, 2, 6, 8)]
    assert store.event_page(project_id, "nope") == []
    assert store.event_page("other-" + project_id, "s1") == []


def test_event_counts_by_agent_and_type(store: Store, project_id: str) -> None:
    ids = _session(store, project_id, 6)
    store.set_active(project_id, [ids[0]], False)
    counts = store.event_counts(project_id, "s1")
    assert counts == [
        EventCount("coder", "tool_invocation", 1, 101.0, 101.0),
        EventCount("coder", "user_message", 1, 104.0, 104.0),
        EventCount("planner", "tool_invocation", 1, 103.0, 103.0),
        EventCount("tester", "tool_invocation", 1, 105.0, 105.0),
        EventCount("tester", "user_message", 1, 102.0, 102.0),
    ]
    assert sum(c.count for c in counts) == 5
    assert store.event_counts(project_id, "nope") == []


def test_hidden_event_counts_by_session(store: Store, project_id: str) -> None:
    ids = _session(store, project_id, 6)
    assert store.hidden_event_counts(project_id) == {}
    store.set_active(project_id, ids[:2], False)
    other = store.list_events(project_id, "s2")
    store.set_active(project_id, [other[0].id], False)
    assert store.hidden_event_counts(project_id) == {"s1": 2, "s2": 1}
    assert store.hidden_event_counts(project_id, ["s1", "nope"]) == {"s1": 2}
    assert store.hidden_event_counts(project_id, []) == {}
    assert store.hidden_event_counts("other-" + project_id) == {}
    store.set_active(project_id, ids[:1], True)  # restored: counted no more
    assert store.hidden_event_counts(project_id, ["s1"]) == {"s1": 1}


def test_entity_type_counts(store: Store, project_id: str) -> None:
    add_entity(store, project_id, "document", "spec", "cache spec")
    add_entity(store, project_id, "document", "guide", "style guide")
    add_entity(store, project_id, "code", "orders.py", "def q(): pass")
    assert store.entity_type_counts(project_id) == {"code": 1, "document": 2}
    assert store.entity_type_counts("other-" + project_id) == {}


def test_list_traces_newest_first_without_loading_them(store: Store, project_id: str) -> None:
    for i, (role, session) in enumerate((("coder", "s1"), ("tester", "s1"), ("coder", "s2"))):
        trace = {
            "context_id": f"ctx_{i}",
            "agent_role": role,
            "session_id": session,
            "task_id": None,
            "intent": f"intent {i} 缓存",
            "policy": role,
            "total_tokens": 100 + i,
        }
        store.put_trace(project_id, f"ctx_{i}", trace)
    listed = store.list_traces(project_id)
    assert [t.context_id for t in listed] == ["ctx_2", "ctx_1", "ctx_0"]
    newest = listed[0]
    assert (newest.agent_role, newest.session_id, newest.intent, newest.policy) == (
        "coder",
        "s2",
        "intent 2 缓存",
        "coder",
    )
    assert newest.total_tokens == 102 and newest.task_id is None
    assert [t.context_id for t in store.list_traces(project_id, session_id="s1")] == [
        "ctx_1",
        "ctx_0",
    ]
    older = store.list_traces(project_id, before=listed[0].created_at, limit=1)
    assert len(older) == 1 and older[0].created_at <= listed[0].created_at
    assert store.list_traces(project_id, limit=2)[-1].context_id == "ctx_1"
    assert store.list_traces("other-" + project_id) == []
