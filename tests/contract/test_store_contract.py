"""The storage contract, part 1: every backend behaves the same for sessions, tasks, events,
soft deletes, entities, relations, state, traces and the schema version.

Each test runs once per backend through the parametrised `store` fixture (tests/conftest.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from contract_helpers import add_entity, make_event, write

from ctxbase.model import Entity, Relation, SessionInfo, StateFact, TaskInfo, relation_id_for
from ctxbase.store.base import SCHEMA_VERSION, Store


def test_schema_version_is_current(store: Store) -> None:
    assert store.schema_version() == SCHEMA_VERSION


def test_projects_are_listed_once(store: Store, project_id: str) -> None:
    store.ensure_project(project_id)
    store.ensure_project(project_id)
    assert store.list_projects().count(project_id) == 1


def test_repositories_are_listed_from_the_projects_items(store: Store, project_id: str) -> None:
    for name, repo in (("a", "httpx"), ("b", "sqlite-utils"), ("c", "httpx")):
        add_entity(store, project_id, "file", name, f"text {name}", properties={"repo": repo})
    add_entity(store, project_id, "document", "d", "no repository")
    other = "other-" + project_id
    add_entity(store, other, "file", "e", "text e", properties={"repo": "elsewhere"})
    assert store.list_repos(project_id) == ["httpx", "sqlite-utils"]
    assert store.list_repos(other) == ["elsewhere"]
    assert store.list_repos("none-" + project_id) == []


def test_sessions_upsert_keeps_one_row(store: Store, project_id: str) -> None:
    s = SessionInfo(project_id=project_id, session_id="s1", title="first", created_at=10.0,
                    updated_at=10.0, metadata={"k": [1, "二"]})  # fmt: skip
    store.upsert_session(s)
    store.upsert_session(s.model_copy(update={"title": "second", "status": "closed"}))
    got = store.get_session(project_id, "s1")
    assert got is not None
    assert (got.title, got.status, got.metadata) == ("second", "closed", {"k": [1, "二"]})
    assert [x.session_id for x in store.list_sessions(project_id)] == ["s1"]
    assert store.get_session(project_id, "nope") is None
    assert store.get_session("other-" + project_id, "s1") is None


def test_tasks_upsert_and_filter_by_session(store: Store, project_id: str) -> None:
    for tid, sid, at in (("t1", "s1", 1.0), ("t2", "s2", 2.0), ("t3", "s1", 3.0)):
        store.upsert_task(TaskInfo(project_id=project_id, task_id=tid, session_id=sid,
                                   created_at=at, updated_at=at))  # fmt: skip
    done = TaskInfo(project_id=project_id, task_id="t1", session_id="s1", status="done",
                    title="ship", created_at=1.0, updated_at=5.0)  # fmt: skip
    store.upsert_task(done)
    t1 = store.get_task(project_id, "t1")
    assert t1 is not None and (t1.status, t1.title, t1.updated_at) == ("done", "ship", 5.0)
    assert [t.task_id for t in store.list_tasks(project_id)] == ["t1", "t2", "t3"]
    assert [t.task_id for t in store.list_tasks(project_id, "s1")] == ["t1", "t3"]
    assert store.get_task(project_id, "t9") is None


def test_write_events_assigns_seq_and_next_edges(store: Store, project_id: str) -> None:
    evs = [make_event(project_id, "s1", f"step {i}", ts=100.0 + i) for i in range(4)]
    first = write(store, *evs[:2])
    rest = write(store, *evs[2:])
    assert [e.seq for e in first + rest] == [1, 2, 3, 4]
    nexts = store.list_relations(project_id, types=["NEXT"])
    assert sorted((r.from_id, r.to_id) for r in nexts) == sorted(
        (evs[i].id, evs[i + 1].id) for i in range(3)
    )
    assert all(r.source == "auto:capture" for r in nexts)
    other = write(store, make_event(project_id, "s2", "elsewhere"))
    assert other[0].seq == 1  # seq is per session


def test_write_events_ignores_duplicates(store: Store, project_id: str) -> None:
    e = make_event(project_id, "s1", "once")
    assert len(write(store, e)) == 1
    assert write(store, e) == []
    assert write(store, e, e) == []
    f = make_event(project_id, "s1", "twice in one batch")
    assert [x.seq for x in write(store, f, f)] == [2]
    assert len(store.list_events(project_id, "s1")) == 2
    assert len(store.list_relations(project_id, types=["NEXT"])) == 1


def test_caused_by_and_refers_to_round_trip(store: Store, project_id: str) -> None:
    a = make_event(project_id, "s1", "question")
    b = make_event(project_id, "s1", "answer", type="assistant_message", parent_event_ids=[a.id])
    c = make_event(project_id, "s1", "note", refers_to=[a.id, b.id])
    write(store, a, b, c)
    got = {e.id: e for e in store.get_events(project_id, [a.id, b.id, c.id])}
    assert got[b.id].parent_event_ids == [a.id]
    assert sorted(got[c.id].refers_to) == sorted([a.id, b.id])
    caused = store.list_relations(project_id, [b.id], direction="out", types=["CAUSED_BY"])
    assert [(r.from_id, r.to_id) for r in caused] == [(b.id, a.id)]
    assert store.existing_ids(project_id, [a.id, "missing", c.id]) == {a.id, c.id}


def test_event_fields_round_trip(store: Store, project_id: str) -> None:
    e = make_event(project_id, "s1", "你好 world", type="tool_result", agent_id="a1",
                   agent_role="coder", task_id="t1", data={"rows": [1, 2], "ok": True},
                   importance=0.9, metadata={"path": "src/x.py"}, ts=123.5)  # fmt: skip
    write(store, e)
    (got,) = store.get_events(project_id, [e.id])
    assert got.model_dump(exclude={"seq"}) == e.model_dump(exclude={"seq"})
    assert got.seq == 1


def test_get_events_keeps_requested_order(store: Store, project_id: str) -> None:
    evs = [make_event(project_id, "s1", f"e{i}") for i in range(5)]
    write(store, *evs)
    wanted = [evs[3].id, evs[0].id, "nope", evs[4].id]
    assert [e.id for e in store.get_events(project_id, wanted)] == [wanted[0], wanted[1], wanted[3]]
    assert store.get_events(project_id, []) == []


def test_list_events_filters_and_last_n(store: Store, project_id: str) -> None:
    evs = [
        make_event(
            project_id,
            "s1" if i % 2 else "s2",
            f"m{i}",
            type="tool_result" if i % 3 == 0 else "user_message",
            task_id="t1" if i < 4 else None,
            ts=1000.0 + i,
        )
        for i in range(8)
    ]
    write(store, *evs)
    s1 = store.list_events(project_id, "s1")
    assert [e.text for e in s1] == ["m1", "m3", "m5", "m7"]
    assert [e.seq for e in s1] == [1, 2, 3, 4]
    assert [e.text for e in store.list_events(project_id, "s1", last_n=2)] == ["m5", "m7"]
    assert [e.text for e in store.list_events(project_id, last_n=3)] == ["m5", "m6", "m7"]
    assert [e.text for e in store.list_events(project_id, types=["tool_result"])] == [
        "m0", "m3", "m6",
    ]  # fmt: skip
    assert [e.text for e in store.list_events(project_id, task_id="t1")] == [
        "m0", "m1", "m2", "m3",
    ]  # fmt: skip
    got = store.list_events(project_id, since=1002.0, until=1004.0)
    assert [e.text for e in got] == ["m2", "m3", "m4"]
    assert store.list_events(project_id, "s1", last_n=0) == []


def test_set_active_hides_events_items_and_edges(store: Store, project_id: str) -> None:
    a, b, c = (make_event(project_id, "s1", f"t{i} keyword") for i in range(3))
    write(store, a, b, c)
    assert store.set_active(project_id, [b.id], False) == 1
    assert store.set_active(project_id, [b.id], False) == 0  # already hidden
    assert [e.id for e in store.list_events(project_id, "s1")] == [a.id, c.id]
    assert store.get_events(project_id, [b.id]) == []
    assert store.get_events(project_id, [b.id], include_inactive=True)[0].active is False
    assert len(store.list_events(project_id, "s1", include_inactive=True)) == 3
    # Both NEXT edges touch b: hidden from every relation read.
    assert store.list_relations(project_id, types=["NEXT"]) == []
    assert store.list_relations(project_id, [a.id]) == []
    assert store.get_items(project_id, [b.id]) == []
    assert store.count_items(project_id) == 2
    assert store.existing_ids(project_id, [b.id]) == {b.id}  # still stored
    assert store.set_active(project_id, [b.id], True) == 1
    assert len(store.list_relations(project_id, types=["NEXT"])) == 2
    assert store.count_items(project_id) == 3


def test_entities_upsert_versions_and_latest(store: Store, project_id: str) -> None:
    e1 = add_entity(store, project_id, "document", "design.md", "v1 body", created_at=5.0)
    assert e1.version == 1 and e1.created_at == 5.0
    e2 = store.upsert_entity(
        e1.model_copy(update={"text": "v2 body", "version": 2, "created_at": 99.0}), []
    )
    assert e2.created_at == 5.0  # the first creation time is kept
    (got,) = store.get_entities(project_id, [e1.id])
    assert (got.text, got.version) == ("v2 body", 2)
    old = Entity(id="document:old", project_id=project_id, type="document", name="design.md",
                 text="old", latest=False)  # fmt: skip
    store.upsert_entity(old, [])
    assert [e.id for e in store.list_entities(project_id, type="document")] == [e1.id]
    both = store.list_entities(project_id, name="design.md", latest_only=False)
    assert {e.id for e in both} == {e1.id, old.id}
    add_entity(store, project_id, "code", "f", "def f(): pass")
    assert len(store.list_entities(project_id, limit=1)) == 1
    assert store.set_active(project_id, [e1.id], False) == 1
    assert store.get_entities(project_id, [e1.id]) == []
    assert store.get_entities(project_id, [e1.id], include_inactive=True)[0].active is False
    assert e1.id not in {e.id for e in store.list_entities(project_id, latest_only=False)}


def test_entity_items_are_replaced_wholesale(store: Store, project_id: str) -> None:
    from contract_helpers import item, match

    ent = add_entity(store, project_id, "document", "notes", "alpha")
    chunks = [item(project_id, f"{ent.id}#{i}", f"bravo chunk {i}", owner_id=ent.id,
                   kind="chunk", type="document") for i in range(3)]  # fmt: skip
    store.upsert_entity(ent, chunks)
    assert store.count_items(project_id) == 3
    assert store.keyword_search(project_id, match("alpha"), None, 10) == []
    store.upsert_entity(ent, chunks[:1])
    assert store.count_items(project_id) == 1
    assert [h.item_id for h in store.keyword_search(project_id, match("bravo"), None, 10)] == [
        chunks[0].item_id
    ]


def _rel(project_id: str, a: str, b: str, type: str = "USES", **kw: object) -> Relation:
    return Relation(project_id=project_id, from_id=a, type=type, to_id=b, source="human", **kw)  # type: ignore[arg-type]


def test_relations_upsert_without_duplicates(store: Store, project_id: str) -> None:
    (r1,) = store.upsert_relations([_rel(project_id, "x", "y", confidence=0.4, created_at=1.0,
                                         valid_from=1.0)])  # fmt: skip
    assert r1.id == relation_id_for(project_id, "x", "USES", "y")
    (r2,) = store.upsert_relations([_rel(project_id, "x", "y", confidence=0.9, created_at=7.0,
                                         valid_from=7.0, properties={"why": "因为"})])  # fmt: skip
    assert (r2.id, r2.created_at, r2.valid_from) == (r1.id, 1.0, 1.0)
    (got,) = store.list_relations(project_id)
    assert (got.confidence, got.properties, got.created_at) == (0.9, {"why": "因为"}, 1.0)


def test_relations_close_and_reopen(store: Store, project_id: str) -> None:
    (r,) = store.upsert_relations([_rel(project_id, "x", "y", created_at=1.0, valid_from=1.0)])
    assert store.close_relation(project_id, r.id, at=5.0) is True
    assert store.close_relation(project_id, r.id, at=6.0) is False  # already closed
    assert store.close_relation(project_id, "rel_missing", at=6.0) is False
    assert store.has_relation(project_id, r.id) is True  # open or closed
    assert store.has_relation(project_id, "rel_missing") is False
    assert store.has_relation(project_id + "-other", r.id) is False
    assert store.list_relations(project_id) == []
    (closed,) = store.list_relations(project_id, include_closed=True)
    assert closed.valid_to == 5.0
    (again,) = store.upsert_relations([_rel(project_id, "x", "y", created_at=9.0, valid_from=9.0)])
    assert (again.valid_from, again.valid_to, again.created_at) == (9.0, None, 1.0)
    assert len(store.list_relations(project_id)) == 1


def test_relations_direction_types_confidence(store: Store, project_id: str) -> None:
    store.upsert_relations([
        _rel(project_id, "a", "b", confidence=0.9, created_at=1.0),
        _rel(project_id, "c", "a", confidence=0.3, created_at=2.0),
        _rel(project_id, "a", "d", type="MENTIONS", confidence=0.6, created_at=3.0),
    ])  # fmt: skip

    def ends(**kw: object) -> list[tuple[str, str]]:
        return [(r.from_id, r.to_id) for r in store.list_relations(project_id, ["a"], **kw)]  # type: ignore[arg-type]

    assert ends() == [("a", "b"), ("c", "a"), ("a", "d")]
    assert ends(direction="out") == [("a", "b"), ("a", "d")]
    assert ends(direction="in") == [("c", "a")]
    assert ends(types=["MENTIONS"]) == [("a", "d")]
    assert ends(min_confidence=0.5) == [("a", "b"), ("a", "d")]
    # left out by type, alone and with the other conditions
    assert ends(exclude_types=["MENTIONS"]) == [("a", "b"), ("c", "a")]
    assert ends(exclude_types=["USES", "MENTIONS"]) == []
    assert ends(exclude_types=["MENTIONS"], direction="out") == [("a", "b")]
    assert ends(exclude_types=["USES"], types=["MENTIONS"]) == [("a", "d")]
    assert ends(exclude_types=[]) == ends()
    with pytest.raises(ValueError):
        store.list_relations(project_id, ["a"], direction="sideways")


def test_relations_to_soft_deleted_entity_are_hidden(store: Store, project_id: str) -> None:
    e = add_entity(store, project_id, "code", "mod.f", "def f(): ...")
    store.upsert_relations([_rel(project_id, "x", e.id), _rel(project_id, "x", "y")])
    store.set_active(project_id, [e.id], False)
    assert [r.to_id for r in store.list_relations(project_id, ["x"])] == ["y"]


def test_relations_of_hidden_events_are_read_when_asked_for(store: Store, project_id: str) -> None:
    a = make_event(project_id, "s1", "ask", ts=1.0)
    b = make_event(project_id, "s1", "hidden step", ts=2.0, parent_event_ids=[a.id])
    c = make_event(project_id, "s1", "answer", ts=3.0, parent_event_ids=[b.id])
    write(store, a, b, c)
    store.set_active(project_id, [b.id], False)

    def caused(**kw: Any) -> list[tuple[str, str]]:
        rels = store.list_relations(project_id, [a.id, b.id], direction="in", **kw)
        return sorted((r.from_id, r.to_id) for r in rels if r.type == "CAUSED_BY")

    assert caused() == []  # hidden with b: b -> a and c -> b
    assert caused(include_hidden=True) == sorted([(b.id, a.id), (c.id, b.id)])
    typed = {"types": ["CAUSED_BY"], "limit_per_node": 5, "include_hidden": True}
    assert caused(**typed) == caused(include_hidden=True)
    assert caused(types=["CAUSED_BY"], limit_per_node=5) == []
    store.set_active(project_id, [b.id], True)
    assert caused() == caused(include_hidden=True)


def test_state_set_history_delete(store: Store, project_id: str) -> None:
    f = StateFact(project_id=project_id, scope="task", scope_id="t1", key="budget", value=100,
                  cause="user", updated_at=1.0)  # fmt: skip
    assert store.set_state(f).version == 1
    assert (
        store.set_state(f.model_copy(update={"value": {"max": 50}, "updated_at": 2.0})).version == 2
    )
    store.set_state(f.model_copy(update={"key": "owner", "value": "李", "updated_at": 3.0}))
    got = store.get_state(project_id, "task", "t1")
    assert [(s.key, s.value, s.version) for s in got] == [
        ("budget", {"max": 50}, 2), ("owner", "李", 1),
    ]  # fmt: skip
    assert store.get_state(project_id, "task", "t1", "budget")[0].cause == "user"
    assert store.delete_state(project_id, "task", "t1", "budget", "done") is True
    assert store.delete_state(project_id, "task", "t1", "budget", "again") is False
    hist = store.state_history(project_id, "task", "t1", "budget")
    assert [(h.version, h.old_value, h.new_value, h.deleted) for h in hist] == [
        (1, None, 100, False), (2, 100, {"max": 50}, False), (3, {"max": 50}, None, True),
    ]  # fmt: skip
    assert hist[-1].cause == "done"
    assert store.set_state(f).version == 4  # versions continue after a delete
    assert len(store.state_history(project_id, "task", "t1")) == 5
    assert store.get_state(project_id, "task", "t2") == []


def test_traces_round_trip(store: Store, project_id: str) -> None:
    trace = {"query": "预算", "picked": [{"id": "e1", "score": 0.5}], "n": 3}
    store.put_trace(project_id, "ctx1", trace)
    assert store.get_trace(project_id, "ctx1") == trace
    store.put_trace(project_id, "ctx1", {"replaced": True})
    assert store.get_trace(project_id, "ctx1") == {"replaced": True}
    assert store.get_trace(project_id, "ctx2") is None
    assert store.get_trace("other-" + project_id, "ctx1") is None


def test_index_generation_moves_on_index_changes(store: Store, project_id: str) -> None:
    g0 = store.index_generation(project_id)
    e = make_event(project_id, "s1", "hello")
    write(store, e)
    g1 = store.index_generation(project_id)
    assert g1 != g0
    store.set_active(project_id, [e.id], False)
    g2 = store.index_generation(project_id)
    assert g2 != g1
    import numpy as np

    store.set_active(project_id, [e.id], True)
    g3 = store.index_generation(project_id)
    store.put_vectors("m", [(project_id, e.id, np.ones(8, dtype=np.float32))])
    assert store.index_generation(project_id) != g3


def test_projects_are_isolated(store: Store, project_id: str) -> None:
    other = "other-" + project_id
    e = make_event(project_id, "s1", "secret plan")
    write(store, e)
    assert store.get_events(other, [e.id]) == []
    assert store.list_events(other) == []
    assert store.existing_ids(other, [e.id]) == set()
    assert store.count_items(other) == 0
    assert store.list_relations(other) == []


def test_api_keys_are_global(store: Store, project_id: str) -> None:
    from ctxbase.errors import StorageError
    from ctxbase.store.base import ApiKeyRecord

    key = ApiKeyRecord(key_id=f"k-{project_id}", key_hash="ab" * 32, name="ci", role="write",
                       projects=(project_id, "*"), created_at=1.0)  # fmt: skip
    store.create_api_key(key)
    with pytest.raises(StorageError):
        store.create_api_key(key)
    assert store.get_api_key(key.key_id) == key
    assert key in store.list_api_keys()
    assert store.revoke_api_key(key.key_id, 2.0) is True
    assert store.revoke_api_key(key.key_id, 3.0) is False
    got = store.get_api_key(key.key_id)
    assert got is not None and got.revoked_at == 2.0
    assert store.get_api_key("missing") is None
