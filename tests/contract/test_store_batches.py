"""The storage contract, batched writes: one write_events call does for a mixed batch what
one call per event would (projects, sessions, duplicates, forgotten ids, edges asserted
before their event, replaced search units), and the last events of several sessions are
found in one call."""

from __future__ import annotations

from contract_helpers import item, make_event, match, write

from ctxbase.model import Relation, SessionInfo, relation_id_for
from ctxbase.store.base import Store
from ctxbase.store.shared import SharedReads


def _next_pairs(store: Store, project_id: str) -> set[tuple[str, str]]:
    return {(r.from_id, r.to_id) for r in store.list_relations(project_id, types=["NEXT"])}


def test_one_batch_over_projects_and_sessions(store: Store, project_id: str) -> None:
    other = "other-" + project_id
    store.upsert_session(SessionInfo(project_id=project_id, session_id="pre", title="made first",
                                     created_at=1.0, updated_at=1.0))  # fmt: skip
    old = make_event(project_id, "s1", "stored before", ts=50.0)
    write(store, old)
    a1 = make_event(project_id, "s1", "a1", ts=100.0)
    b1 = make_event(project_id, "s2", "b1", ts=101.0)
    o1 = make_event(other, "s1", "o1", ts=102.0)
    p1 = make_event(project_id, "pre", "p1", ts=103.0)
    a2 = make_event(project_id, "s1", "a2", ts=104.0, parent_event_ids=[b1.id])
    o2 = make_event(other, "s1", "o2", ts=105.0, refers_to=[o1.id])
    b2 = make_event(project_id, "s2", "b2", ts=106.0)
    batch = [a1, b1, old, o1, p1, a1, a2, o2, b2]  # `old` is stored, a1 repeats
    stored = write(store, *batch)
    assert [(e.id, e.seq) for e in stored] == [
        (a1.id, 2), (b1.id, 1), (o1.id, 1), (p1.id, 1), (a2.id, 3), (o2.id, 2), (b2.id, 2),
    ]  # fmt: skip
    assert [e.text for e in store.list_events(project_id, "s1")] == ["stored before", "a1", "a2"]
    assert [e.text for e in store.list_events(project_id, "s2")] == ["b1", "b2"]
    assert [e.text for e in store.list_events(other, "s1")] == ["o1", "o2"]
    assert _next_pairs(store, project_id) == {(old.id, a1.id), (a1.id, a2.id), (b1.id, b2.id)}
    assert _next_pairs(store, other) == {(o1.id, o2.id)}
    (got_a2,) = store.get_events(project_id, [a2.id])
    assert got_a2.parent_event_ids == [b1.id]
    (got_o2,) = store.get_events(other, [o2.id])
    assert got_o2.refers_to == [o1.id]
    pre = store.get_session(project_id, "pre")
    assert pre is not None and (pre.title, pre.created_at) == ("made first", 1.0)
    s2 = store.get_session(project_id, "s2")
    assert s2 is not None and s2.created_at == 101.0 and s2.updated_at >= 106.0
    o = store.get_session(other, "s1")
    assert o is not None and o.created_at == 102.0
    assert store.count_items(project_id) == 6 and store.count_items(other) == 2
    # the next batch continues every session where this one left it
    a3 = make_event(project_id, "s1", "a3")
    (s,) = write(store, a3)
    assert s.seq == 4 and (a2.id, a3.id) in _next_pairs(store, project_id)


def test_forgotten_ids_in_a_batch_are_skipped(store: Store, project_id: str) -> None:
    gone = make_event(project_id, "s1", "forget me")
    write(store, gone)
    store.forget(project_id, event_ids=[gone.id])
    keep = make_event(project_id, "s1", "keep me")
    stored = write(store, gone, keep, gone)
    assert [e.id for e in stored] == [keep.id]
    assert store.existing_ids(project_id, [gone.id, keep.id]) == {keep.id}
    assert [h.item_id for h in store.keyword_search(project_id, match("forget"), None, 5)] == []


def test_an_edge_asserted_before_its_event_keeps_its_creation(
    store: Store, project_id: str
) -> None:
    a = make_event(project_id, "s1", "first", ts=100.0)
    write(store, a)
    b = make_event(project_id, "s1", "second", ts=200.0, refers_to=[a.id])
    store.upsert_relations([
        Relation(project_id=project_id, from_id=a.id, type="NEXT", to_id=b.id, source="human",
                 confidence=0.5, created_at=5.0, valid_from=6.0, valid_to=7.0),
        Relation(project_id=project_id, from_id=b.id, type="REFERS_TO", to_id=a.id,
                 source="human", created_at=8.0, valid_from=9.0),
    ])  # fmt: skip
    write(store, b)
    rels = {r.type: r for r in store.list_relations(project_id, [b.id])}
    nxt, ref = rels["NEXT"], rels["REFERS_TO"]
    assert nxt.id == relation_id_for(project_id, a.id, "NEXT", b.id)
    # closed before: a new validity period; open before: its own
    assert (nxt.created_at, nxt.valid_from, nxt.valid_to) == (5.0, 200.0, None)
    assert (ref.created_at, ref.valid_from, ref.valid_to) == (8.0, 9.0, None)
    assert (nxt.source, nxt.confidence, ref.source) == ("auto:capture", 1.0, "auto:capture")


def test_search_units_stored_under_the_same_id_are_replaced(store: Store, project_id: str) -> None:
    a = make_event(project_id, "s1", "one")
    b = make_event(project_id, "s1", "two")
    c = make_event(project_id, "s1", "three")
    store.write_events([a], [[item(project_id, "unit", "walrus", owner_id=a.id)]])
    # an id stored before, then one id twice in one batch: the last one stays
    store.write_events(
        [b, c],
        [
            [item(project_id, "unit", "narwhal", owner_id=b.id)],
            [item(project_id, "unit", "pelican", owner_id=c.id)],
        ],
    )
    assert store.count_items(project_id) == 1
    (unit,) = store.get_items(project_id, ["unit"])
    assert (unit.text, unit.owner_id) == ("pelican", c.id)
    for word, found in (("walrus", []), ("narwhal", []), ("pelican", ["unit"])):
        assert [h.item_id for h in store.keyword_search(project_id, match(word), None, 5)] == found


def test_last_events_of_sessions(store: Store, project_id: str) -> None:
    assert isinstance(store, SharedReads)
    evs = [make_event(project_id, f"s{i % 3}", f"m{i}", ts=10.0 + i) for i in range(8)]
    write(store, *evs)
    write(store, make_event("other-" + project_id, "s0", "elsewhere"))
    store.upsert_session(SessionInfo(project_id=project_id, session_id="empty"))
    store.set_active(project_id, [evs[7].id], False)  # s1's last: m4 is its last shown one
    got = store.last_events_of_sessions(project_id, ["s0", "s1", "s2", "empty", "nope", "s0"])
    assert {sid: e.text for sid, e in got.items()} == {"s0": "m6", "s1": "m4", "s2": "m5"}
    for sid, event in got.items():
        assert event == store.list_events(project_id, sid, last_n=1)[0]
    assert store.last_events_of_sessions(project_id, []) == {}
