"""The storage contract, part 3: hard forget (by event, entity, session, project) with its
report, tombstones, and copying a project between backends."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from contract_helpers import add_entity, make_event, match, write

from ctxbase.model import Relation, SessionInfo, StateFact, TaskInfo
from ctxbase.store.base import Store, TombstoneKind
from ctxbase.store.postgres import PostgresStore
from ctxbase.store.rows import tombstone_hash
from ctxbase.store.schema import TABLES
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project


def _populate(store: Store, project_id: str) -> dict[str, list[str]]:
    store.upsert_session(SessionInfo(project_id=project_id, session_id="s1", title="one"))
    store.upsert_task(TaskInfo(project_id=project_id, task_id="t1", session_id="s1"))
    s1 = [make_event(project_id, "s1", f"会话一 step {i} alpha", ts=10.0 + i) for i in range(3)]
    s2 = [make_event(project_id, "s2", f"session two beta {i}", ts=20.0 + i) for i in range(2)]
    write(store, *s1, *s2)
    ent = add_entity(store, project_id, "document", "spec.md", "gamma spec text")
    store.upsert_relations([
        Relation(project_id=project_id, from_id=ent.id, type="MENTIONS", to_id=s2[0].id,
                 source="human"),
    ])  # fmt: skip
    store.set_state(StateFact(project_id=project_id, scope="session", scope_id="s1", key="k",
                              value=1))  # fmt: skip
    store.set_state(StateFact(project_id=project_id, scope="project", key="k", value=2))
    store.put_trace(project_id, "ctx", {"a": 1})
    ids = [e.id for e in s1 + s2] + [ent.id]
    store.put_vectors("m", [(project_id, i, np.ones(4, dtype=np.float32)) for i in ids])
    return {"s1": [e.id for e in s1], "s2": [e.id for e in s2], "entity": [ent.id]}


def test_forget_events_removes_rows_index_vectors_edges(store: Store, project_id: str) -> None:
    ids = _populate(store, project_id)
    gone = ids["s2"][0]
    report = store.forget(project_id, event_ids=[gone])
    assert report.removed["events"] == 1
    assert report.removed["items"] == 1
    assert report.removed["item_vectors"] == 1
    assert report.removed["relations"] == 2  # NEXT to the next event and the MENTIONS edge
    assert store.get_events(project_id, [gone], include_inactive=True) == []
    assert store.existing_ids(project_id, [gone]) == set()
    assert [h.item_id for h in store.keyword_search(project_id, match("beta"), None, 9)] == [
        ids["s2"][1]
    ]
    assert all(gone not in (r.from_id, r.to_id) for r in store.list_relations(project_id))
    # A stale retry of the forgotten event is ignored (tombstone).
    retry = make_event(project_id, "s2", "session two beta 0", ts=20.0)
    assert retry.id == gone and write(store, retry) == []


def test_forgotten_ids_names_the_events_forgotten_before(store: Store, project_id: str) -> None:
    ids = _populate(store, project_id)
    gone, kept = ids["s2"][0], ids["s2"][1]
    (entity,) = ids["entity"]
    assert store.forgotten_ids(project_id, [gone, kept, entity]) == set()
    # named beside a stored event, an id that was never one is not tombstoned
    store.forget(project_id, event_ids=[gone, "ev_never"], entity_ids=[entity])
    assert store.forgotten_ids(project_id, [gone, kept, entity, "ev_never", gone]) == {gone}
    assert store.forgotten_ids(project_id, []) == set()
    # per project: the same id elsewhere is not forgotten there
    assert store.forgotten_ids(project_id + "-other", [gone]) == set()
    # a session's events and a whole project's are tombstoned too, many ids in one call
    store.forget(project_id, session_id="s1")
    many = [f"ev_{n}" for n in range(1200)] + ids["s1"]
    assert store.forgotten_ids(project_id, many) == {*ids["s1"]}
    store.forget(project_id, whole_project=True)
    assert store.forgotten_ids(project_id, [*many, gone, kept]) == {*ids["s1"], gone, kept}


def test_forgotten_entities_and_sessions_keep_tombstones_of_their_kind(
    store: Store, project_id: str
) -> None:
    ids = _populate(store, project_id)
    (entity,) = ids["entity"]
    kinds: tuple[TombstoneKind, ...] = ("event", "entity", "session")
    store.forget(project_id, entity_ids=[entity, "doc:never"])
    assert store.forgotten_ids(project_id, [entity, "doc:never"], ("entity",)) == {entity}
    assert store.forgotten_ids(project_id, [entity]) == set()  # not as an event
    # a session named beside a stored event but never held is not tombstoned
    store.forget(project_id, event_ids=[ids["s2"][0]], session_id="s-never")
    assert store.forgotten_ids(project_id, ["s-never"], kinds) == set()
    store.forget(project_id, session_id="s1")
    assert store.forgotten_ids(project_id, ["s1", "s2"], ("session",)) == {"s1"}
    assert store.forgotten_ids(project_id, ["s1"], ("event", "entity")) == set()
    # an entity created again (on purpose, unlike a stale event retry) lifts its tombstone
    assert add_entity(store, project_id, "document", "spec.md", "gamma again").id == entity
    assert store.forgotten_ids(project_id, [entity], kinds) == set()
    # a whole project's events, entities and sessions are tombstoned, each as its kind
    store.forget(project_id, whole_project=True)
    kept = ids["s2"][1]
    assert store.forgotten_ids(project_id, [entity, "s2", kept], kinds) == {entity, "s2", kept}
    assert store.forgotten_ids(project_id, ["s2"], ("event", "entity")) == set()
    # hashes only; an event's is the bare digest, as every tombstone written before kinds
    rows = [r["hashed_id"] for batch in store.export_rows(project_id, "tombstones") for r in batch]
    # 5 events, the entity (one row, forgotten twice), s1 and s2, and the project itself
    assert len(rows) == 9
    assert all(re.fullmatch(r"((entity|session|project):)?[0-9a-f]{64}", h) for h in rows)
    assert tombstone_hash(project_id, "project") in rows
    assert tombstone_hash(kept) == hashlib.sha256(kept.encode()).hexdigest() in rows


def test_a_tombstone_keeps_when_its_id_was_last_forgotten(store: Store, project_id: str) -> None:
    """forgotten_times: the time of the latest forget of each id forgotten as the kind
    asked; an id forgotten again takes the later time."""
    import time

    pid = project_id
    write(store, make_event(pid, "s1", "first life"))
    before = time.time()
    store.forget(pid, session_id="s1")
    first = store.forgotten_times(pid, ["s1", "s-never"], "session")
    assert set(first) == {"s1"} and before <= (first["s1"] or 0) <= time.time()
    assert store.forgotten_times(pid, ["s1"], "event") == {}
    write(store, make_event(pid, "s1", "second life"))
    time.sleep(0.01)
    store.forget(pid, session_id="s1")
    again = store.forgotten_times(pid, ["s1"], "session")["s1"]
    assert again is not None and first["s1"] is not None and again > first["s1"]
    assert store.forgotten_times(pid, [], "session") == {}


def test_forget_last_event_moves_the_session_tail(store: Store, project_id: str) -> None:
    ids = _populate(store, project_id)
    store.forget(project_id, event_ids=[ids["s1"][-1]])
    (new,) = write(store, make_event(project_id, "s1", "after forget"))
    nexts = store.list_relations(project_id, [new.id], direction="in", types=["NEXT"])
    assert [r.from_id for r in nexts] == [ids["s1"][1]]


def test_forget_entity(store: Store, project_id: str) -> None:
    ids = _populate(store, project_id)
    report = store.forget(project_id, entity_ids=ids["entity"])
    assert report.removed["entities"] == 1 and report.removed["relations"] == 1
    assert store.get_entities(project_id, ids["entity"], include_inactive=True) == []
    assert store.keyword_search(project_id, match("gamma"), None, 5) == []
    # Entities may be created again on purpose.
    again = add_entity(store, project_id, "document", "spec.md", "gamma again")
    assert store.get_entities(project_id, [again.id])


def test_forget_session(store: Store, project_id: str) -> None:
    ids = _populate(store, project_id)
    report = store.forget(project_id, session_id="s1")
    assert report.removed["events"] == 3
    assert report.removed["sessions"] == 1 and report.removed["tasks"] == 1
    assert report.removed["state"] == 1 and report.removed["state_history"] == 1
    assert store.list_events(project_id, "s1", include_inactive=True) == []
    assert store.get_session(project_id, "s1") is None
    assert store.get_state(project_id, "project", "", "k")  # other scopes stay
    assert len(store.list_events(project_id, "s2")) == 2
    assert write(store, make_event(project_id, "s1", "会话一 step 0 alpha", ts=10.0)) == []
    assert {e.id for e in store.list_events(project_id)} == set(ids["s2"])


def test_forget_whole_project(store: Store, project_id: str) -> None:
    ids = _populate(store, project_id)
    report = store.forget(project_id, whole_project=True)
    for table in ("events", "entities", "items", "item_vectors", "relations", "sessions",
                  "tasks", "state", "state_history", "traces", "projects"):  # fmt: skip
        assert report.removed.get(table, 0) > 0, table
    assert report.removed["events"] == 5
    assert project_id not in store.list_projects()
    assert store.count_items(project_id) == 0
    assert store.list_relations(project_id) == []
    assert store.get_trace(project_id, "ctx") is None
    assert write(store, make_event(project_id, "s2", "session two beta 1", ts=21.0)) == []
    assert ids["s2"][1] not in store.existing_ids(project_id, ids["s2"])


def _anchored(store: Store, project_id: str) -> dict[str, str]:
    """Two messages and what capture anchoring made of them: a requirement of the first, a
    mention only it names, one both name; and an ingested table the first names."""
    a, b = write(store, make_event(project_id, "s1", "must keep zqxpay in ledger"),
                 make_event(project_id, "s2", "ask mallory"))  # fmt: skip
    req = add_entity(store, project_id, "requirement", "must keep zqxpay", "must keep zqxpay",
                     properties={"event_id": a.id, "rule": "ctxbase:requirement"})  # fmt: skip
    own = add_entity(store, project_id, "mention", "zqxpay", "table zqxpay",
                     properties={"kind": "table", "rule": "ctxbase:table_name"})  # fmt: skip
    shared = add_entity(store, project_id, "mention", "mallory", "person mallory",
                        properties={"kind": "person", "rule": "ctxbase:person_handle"})  # fmt: skip
    table = add_entity(store, project_id, "table", "ledger", "CREATE TABLE ledger",
                       properties={"rule": "auto:sql"})  # fmt: skip
    store.upsert_relations([
        Relation(project_id=project_id, from_id=f, type=t, to_id=to, source="ctxbase:x")
        for f, t, to in ((a.id, "GENERATES", req.id), (a.id, "MENTIONS", own.id),
                         (a.id, "MENTIONS", shared.id), (b.id, "MENTIONS", shared.id),
                         (a.id, "MENTIONS", table.id))
    ])  # fmt: skip
    return {"a": a.id, "b": b.id, "req": req.id, "own": own.id, "shared": shared.id,
            "table": table.id}  # fmt: skip


def _shown(store: Store, project_id: str, ids: dict[str, str]) -> set[str]:
    found = {e.id for e in store.get_entities(project_id, list(ids.values()))}
    return {name for name, i in ids.items() if i in found and name not in ("a", "b")}


def test_hiding_a_message_hides_what_was_anchored_from_it(store: Store, project_id: str) -> None:
    ids = _anchored(store, project_id)
    assert store.set_active(project_id, [ids["a"]], False) == 3  # the message, req, own
    assert _shown(store, project_id, ids) == {"shared", "table"}
    assert store.keyword_search(project_id, match("zqxpay"), None, 9) == []
    assert store.set_active(project_id, [ids["b"]], False) == 2  # no visible event names it
    assert _shown(store, project_id, ids) == {"table"}
    assert store.set_active(project_id, [ids["a"]], True) == 4
    assert _shown(store, project_id, ids) == {"req", "own", "shared", "table"}
    assert len(store.keyword_search(project_id, match("zqxpay"), None, 9)) == 3


def test_restoring_a_message_brings_back_what_was_hidden_with_it(
    store: Store, project_id: str
) -> None:
    ids = _anchored(store, project_id)
    assert store.set_active(project_id, [ids["a"]], False) == 3  # the message, req, own
    assert store.set_active(project_id, [ids["a"]], True) == 3
    assert _shown(store, project_id, ids) == {"req", "own", "shared", "table"}
    assert len(store.keyword_search(project_id, match("zqxpay"), None, 9)) == 3


def test_restoring_a_message_leaves_hidden_what_was_hidden_on_its_own(
    store: Store, project_id: str
) -> None:
    ids = _anchored(store, project_id)
    assert store.set_active(project_id, [ids["req"]], False) == 1  # hidden first, by its id
    assert store.set_active(project_id, [ids["a"]], False) == 2  # the message and own
    assert _shown(store, project_id, ids) == {"shared", "table"}
    assert store.set_active(project_id, [ids["a"]], True) == 2  # req stays hidden
    assert _shown(store, project_id, ids) == {"own", "shared", "table"}
    found = {h.item_id for h in store.keyword_search(project_id, match("zqxpay"), None, 9)}
    assert found and not any(i.startswith(ids["req"]) for i in found)
    assert store.set_active(project_id, [ids["req"]], True) == 1  # restored by its own id
    assert _shown(store, project_id, ids) == {"req", "own", "shared", "table"}
    assert len(store.keyword_search(project_id, match("zqxpay"), None, 9)) == 3


def test_an_entity_hidden_by_its_id_after_its_message_stays_hidden(
    store: Store, project_id: str
) -> None:
    """Hidden with the message, then hidden by its own id too (nothing changes then): the
    user's own hide holds when the message comes back."""
    ids = _anchored(store, project_id)
    assert store.set_active(project_id, [ids["a"]], False) == 3
    assert store.set_active(project_id, [ids["own"]], False) == 0  # already hidden
    assert store.set_active(project_id, [ids["a"]], True) == 2  # the message and req
    assert _shown(store, project_id, ids) == {"req", "shared", "table"}
    assert store.set_active(project_id, [ids["own"]], True) == 1
    assert _shown(store, project_id, ids) == {"req", "own", "shared", "table"}


def test_forget_removes_what_only_the_message_made(store: Store, project_id: str) -> None:
    ids = _anchored(store, project_id)
    store.set_active(project_id, [ids["b"]], False)  # hidden, not forgotten: still names it
    report = store.forget(project_id, event_ids=[ids["a"]])
    assert report.removed["events"] == 1 and report.removed["entities"] == 2
    left = store.get_entities(project_id, list(ids.values()), include_inactive=True)
    assert {e.id for e in left} == {ids["shared"], ids["table"]}
    report = store.forget(project_id, event_ids=[ids["b"]])
    assert report.removed["entities"] == 1  # mallory: nothing names it now
    assert [e.id for e in store.get_entities(project_id, [ids["table"]])] == [ids["table"]]


def _snapshot(store: Store, project_id: str) -> dict[str, object]:
    return {
        "events": [e.model_dump() for e in store.list_events(project_id, include_inactive=True)],
        "entities": [e.model_dump() for e in store.list_entities(project_id)],
        "relations": [r.model_dump() for r in store.list_relations(project_id)],
        "sessions": [s.model_dump() for s in store.list_sessions(project_id)],
        "state": store.state_history(project_id, "session", "s1"),
        "trace": store.get_trace(project_id, "ctx"),
        "vectors": sorted(r.item_id for b in store.iter_vectors(project_id, "m") for r in b),
        "keyword": sorted(
            h.item_id for h in store.keyword_search(project_id, match("alpha"), None, 9)
        ),
    }


@pytest.mark.parametrize("direction", ["sqlite->postgres", "postgres->sqlite"])
def test_copy_project_between_backends(
    tmp_path: Path, pg_url: str, project_id: str, direction: str
) -> None:
    lite = SQLiteStore(str(tmp_path / "copy.db"))
    pg = PostgresStore(pg_url, max_size=2)
    src, dst = (lite, pg) if direction == "sqlite->postgres" else (pg, lite)
    try:
        _populate(src, project_id)
        src.set_active(project_id, [src.list_events(project_id, "s2")[0].id], False)
        counts = copy_project(src, dst, project_id, batch=2)
        assert set(counts) == set(TABLES)
        assert all(c.matches and not c.forgotten for c in counts.values()), counts
        assert (counts["events"].source, counts["events"].destination) == (5, 5)
        assert counts["items"].source == 6
        assert _snapshot(dst, project_id) == _snapshot(src, project_id)
        # The copy continues where the source stopped: the next event gets seq 4.
        assert write(dst, make_event(project_id, "s1", "next one"))[0].seq == 4
    finally:
        lite.close()
        pg.close()


def test_bulk_copy_keeps_vectors_searchable(tmp_path: Path, pg_url: str, project_id: str) -> None:
    """copy_project(bulk=True): the same rows as a plain copy, and the vector index is back
    (PostgreSQL builds it once, after the copy) and used by vector searches."""
    lite = SQLiteStore(str(tmp_path / "bulk.db"))
    pg = PostgresStore(pg_url, max_size=2)
    try:
        _populate(lite, project_id)
        counts = copy_project(lite, pg, project_id, batch=2, bulk=True)
        assert all(c.matches and not c.forgotten for c in counts.values()), counts
        assert _snapshot(pg, project_id) == _snapshot(lite, project_id)
        assert "item_vectors_hnsw_4" in _hnsw_indexes(pg)
        plan = _plan(pg, 4)
        assert "item_vectors_hnsw_4" in plan, plan
        query = next(r.vector for b in lite.iter_vectors(project_id, "m") for r in b)
        got = pg.vector_search(project_id, "m", query, 3)
        assert got is not None and got[0][1] == pytest.approx(1.0, abs=1e-5)
    finally:
        lite.close()
        pg.close()


def _rows(store: Store, project_id: str, table: str) -> list[dict[str, Any]]:
    return [r for batch in store.export_rows(project_id, table, 2) for r in batch]


def _comparable(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as sorted texts; vectors as lists, the projects' write counter left out (each
    import bumps it)."""
    out = []
    for r in rows:
        r = {k: (v.tolist() if k == "vec" else v) for k, v in r.items() if k != "generation"}
        out.append(repr(sorted(r.items())))
    return sorted(out)


def test_import_rows_counts_only_the_rows_it_inserted(store: Store, project_id: str) -> None:
    """A batch holding rows already there (and one row twice) counts only its new rows, and
    every row comes back as exported: JSON, vectors, timestamps to the last bit."""
    _populate(store, project_id)
    copy = f"{project_id}-copy"
    exported = {t: [{**r, "project_id": copy} for r in _rows(store, project_id, t)] for t in TABLES}
    exported["events"][0]["ts"] = 1700000000.1234567  # 17 significant digits
    exported["events"][0]["importance"] = 1 / 3
    for table in TABLES:
        rows = exported[table]
        half = rows[: len(rows) // 2]
        assert store.import_rows(copy, table, half) == len(half), table
        batch = [*rows, *rows[:1]]  # the first row again within the batch
        assert store.import_rows(copy, table, batch) == len(rows) - len(half), table
        assert store.import_rows(copy, table, rows) == 0, table
        assert store.count_rows(copy, table) == len(rows), table
    for table in TABLES:
        got = _rows(store, copy, table)
        assert _comparable(got) == _comparable(exported[table]), table
    event = store.get_events(copy, [exported["events"][0]["event_id"]])[0]
    assert (event.ts, event.importance) == (1700000000.1234567, 1 / 3)
    vectors = [r.vector for b in store.iter_vectors(copy, "m") for r in b]
    assert len(vectors) == 6 and all(v.dtype == np.float32 for v in vectors)
    # the imported items are in the keyword index
    found = store.keyword_search(copy, match("alpha"), None, 9)
    assert sorted(h.item_id for h in found) == sorted(
        h.item_id for h in store.keyword_search(project_id, match("alpha"), None, 9)
    )
    with pytest.raises(ValueError, match="another project"):
        store.import_rows(copy, "events", [*exported["events"][:1], {"project_id": "x"}])


def _plan(pg: PostgresStore, dim: int) -> str:
    import psycopg
    from pgvector.psycopg import register_vector

    with psycopg.connect(pg.url) as conn:
        register_vector(conn)
        # A tiny table: ask whether the index is usable at all. Without the project filter and
        # with the other scans off, so the primary key (project first) is no cheaper way in
        # (with it, the planner's choice followed what other tests had left in the table).
        for scan in ("seqscan", "bitmapscan"):
            conn.execute(f"SET enable_{scan} = off")
        rows = conn.execute(
            f"EXPLAIN SELECT item_id FROM item_vectors WHERE dim = {dim} "
            f"ORDER BY vec::vector({dim}) <=> %s LIMIT 3",
            (np.ones(dim, dtype=np.float32),),
        ).fetchall()
    return "\n".join(r[0] for r in rows)


def _hnsw_indexes(pg: PostgresStore) -> list[str]:
    import psycopg

    with psycopg.connect(pg.url) as conn:
        return sorted(
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'item_vectors' "
                "AND indexname LIKE 'item_vectors_hnsw_%'"
            ).fetchall()
        )


def test_bulk_load_defers_the_vector_index_and_rebuilds_it_on_failure(
    pg_url: str, project_id: str
) -> None:
    pg = PostgresStore(pg_url, max_size=2)
    try:
        ev = make_event(project_id, "s1", "alpha vectors")
        write(pg, ev)
        pg.put_vectors("m", [(project_id, ev.id, np.ones(16, dtype=np.float32))])
        assert "item_vectors_hnsw_16" in _hnsw_indexes(pg)
        with pytest.raises(RuntimeError), pg.bulk_load():
            assert "item_vectors_hnsw_16" not in _hnsw_indexes(pg)
            more = make_event(project_id, "s1", "beta vectors")
            write(pg, more)
            pg.put_vectors("m", [(project_id, more.id, np.full(16, 2.0, dtype=np.float32))])
            assert "item_vectors_hnsw_16" not in _hnsw_indexes(pg)  # not filled row by row
            # searches during the load stay right (they scan)
            found = pg.vector_search(project_id, "m", np.ones(16, dtype=np.float32), 5)
            assert found is not None and {i for i, _ in found} == {ev.id, more.id}
            raise RuntimeError("load failed")
        assert "item_vectors_hnsw_16" in _hnsw_indexes(pg)  # rebuilt although it failed
    finally:
        pg.close()


def test_bulk_load_is_harmless_on_every_backend(store: Store, project_id: str) -> None:
    ev = make_event(project_id, "s1", "gamma vectors")
    with store.bulk_load():
        write(store, ev)
        store.put_vectors("m", [(project_id, ev.id, np.ones(8, dtype=np.float32))])
    assert [r.item_id for b in store.iter_vectors(project_id, "m") for r in b] == [ev.id]
    assert [h.item_id for h in store.keyword_search(project_id, match("gamma"), None, 3)] == [ev.id]
