"""copy_project (migrate-data) never writes back what the destination hard-forgot.

A backup taken before a forget, copied into the store that forgot, must leave it as it was;
copied into a store holding only that store's tombstones, it must end up as that store (the
same rows left out, the same traces redacted) on every pair of backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from contract_helpers import add_entity, make_event, match, open_store, write

from ctxbase.model import Relation, SessionInfo, StateFact, TaskInfo
from ctxbase.retrieve.indexing import event_items
from ctxbase.store.base import FEEDBACK_SCOPE, Store
from ctxbase.store.schema import TABLES
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project

SECRET = "must keep zqxpay in ledger"


def _populate(store: Store, pid: str) -> dict[str, str]:
    """Session s1 (to be forgotten) and s2 (kept), and what hangs off s1's messages:
    an entity anchored from one, a mention only it names, facts it caused, feedback on it,
    a trace of s2 that used it."""
    store.upsert_session(SessionInfo(project_id=pid, session_id="s1", title="one"))
    store.upsert_session(SessionInfo(project_id=pid, session_id="s2", title="two"))
    store.upsert_task(TaskInfo(project_id=pid, task_id="t1", session_id="s1"))
    a, a2, b, c = write(
        store,
        make_event(pid, "s1", SECRET, ts=10.0, task_id="t1"),
        make_event(pid, "s1", "and the walrus code is 42", ts=11.0),
        make_event(pid, "s2", "ask mallory", ts=20.0),
        make_event(pid, "s2", "the cache is Redis", ts=21.0),
    )
    req = add_entity(store, pid, "requirement", "must keep zqxpay", "must keep zqxpay",
                     properties={"event_id": a.id, "rule": "ctxbase:requirement"})  # fmt: skip
    own = add_entity(store, pid, "mention", "zqxpay", "table zqxpay",
                     properties={"kind": "table", "rule": "ctxbase:table_name"})  # fmt: skip
    shared = add_entity(store, pid, "mention", "mallory", "person mallory",
                        properties={"kind": "person", "rule": "ctxbase:person_handle"})  # fmt: skip
    store.upsert_relations([
        Relation(project_id=pid, from_id=f, type=t, to_id=to, source="ctxbase:x")
        for f, t, to in ((a.id, "GENERATES", req.id), (a.id, "MENTIONS", own.id),
                         (a.id, "MENTIONS", shared.id), (b.id, "MENTIONS", shared.id))
    ])  # fmt: skip
    for scope, scope_id, key, cause in (
        ("session", "s1", "mood", None),
        ("task", "t1", "step", None),
        ("project", pid, "ledger", "extracted by rule: 'keep zqxpay'"),  # quotes a
        ("project", pid, "cache", "extracted by rule: 'the cache is Redis'"),
        (FEEDBACK_SCOPE, "", a.id, None),
        (FEEDBACK_SCOPE, "", c.id, None),
    ):
        store.set_state(StateFact(project_id=pid, scope=scope, scope_id=scope_id, key=key,
                                  value=1, cause=cause))  # fmt: skip
    # a later version caused by nothing forgotten: the fact still goes whole
    store.set_state(StateFact(project_id=pid, scope="project", scope_id=pid, key="ledger", value=2))
    store.put_trace(pid, "ctx-s1", {"session_id": "s1", "intent": "x"})
    store.put_trace(pid, "ctx-s2", {
        "session_id": "s2", "intent": f"about {SECRET}",
        "items": [{"id": a.id, "text": SECRET, "source": "event"},
                  {"id": c.id, "text": "the cache is Redis", "source": "event"}],
    })  # fmt: skip
    items = [r["item_id"] for batch in store.export_rows(pid, "items") for r in batch]
    store.put_vectors("m", [(pid, i, np.ones(4, dtype=np.float32)) for i in items])
    return {"a": a.id, "a2": a2.id, "b": b.id, "c": c.id, "req": req.id, "own": own.id,
            "shared": shared.id}  # fmt: skip


def _snapshot(store: Store, pid: str) -> dict[str, list[str]]:
    """Every table's rows as sorted JSON texts, keys sorted (PostgreSQL's jsonb keeps its
    own key order), the projects' write counter left out (each import bumps it)."""
    out: dict[str, list[str]] = {}
    for table in TABLES:
        rows = [r for batch in store.export_rows(pid, table) for r in batch]
        out[table] = sorted(
            json.dumps({k: v.tolist() if k == "vec" else v for k, v in r.items()
                        if k != "generation"}, sort_keys=True)
            for r in rows
        )  # fmt: skip
    return out


@pytest.fixture(params=["sqlite->sqlite", "sqlite->postgres", "postgres->sqlite"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store, Store]]:
    """(backup, live, fresh): the backup and live on the backends named; fresh, a third
    store for the same project, is SQLite (PostgreSQL holds one of the other two)."""
    bak_kind, live_kind = request.param.split("->")
    url = request.getfixturevalue("pg_url") if "postgres" in request.param else None
    opened = [
        open_store(bak_kind, tmp_path / "bak.db", url),
        open_store(live_kind, tmp_path / "live.db", url),
        SQLiteStore(str(tmp_path / "fresh.db")),
    ]
    yield opened[0], opened[1], opened[2]
    for store in opened:
        store.close()


def test_a_backup_does_not_bring_back_what_was_forgotten(
    stores: tuple[Store, Store, Store], project_id: str
) -> None:
    bak, live, fresh = stores
    pid = project_id
    ids = _populate(bak, pid)
    assert all(c.matches and not c.forgotten for c in copy_project(bak, live, pid).values())
    report = live.forget(pid, session_id="s1")
    assert report.removed["events"] == 2 and report.removed["entities"] == 2
    forgotten_state = _snapshot(live, pid)

    counts = copy_project(bak, live, pid, batch=2)
    assert all(c.matches for c in counts.values()), counts
    assert _snapshot(live, pid) == forgotten_state  # nothing written back
    left_out = {t: c.forgotten for t, c in counts.items() if c.forgotten}
    assert left_out["sessions"] == 1 and left_out["tasks"] == 1
    assert left_out["events"] == 2 and left_out["entities"] == 2  # req and own
    assert left_out["items"] == 4 and left_out["item_vectors"] == 4
    # GENERATES, both of a's MENTIONS and NEXT a -> a2; b's MENTIONS of mallory stays
    assert left_out["relations"] == 4
    # s1's and t1's facts, the fact a caused (both versions), the feedback on a
    assert left_out["state"] == 4 and left_out["state_history"] == 5
    assert left_out["traces"] == 1
    assert counts["tombstones"].own == counts["tombstones"].destination > 0
    assert live.get_events(pid, [ids["a"], ids["a2"]], include_inactive=True) == []
    assert live.keyword_search(pid, match("zqxpay walrus"), None, 9) == []
    assert live.get_session(pid, "s1") is None

    # A store holding only live's tombstones: the backup copied in makes it live's twin,
    # the trace of s2 redacted as the forget redacted it.
    tombstones = [r for batch in live.export_rows(pid, "tombstones") for r in batch]
    fresh.import_rows(pid, "tombstones", tombstones)
    counts = copy_project(bak, fresh, pid, batch=3)
    assert all(c.matches for c in counts.values()), counts
    assert counts["traces"].redacted == 1
    assert _snapshot(fresh, pid) == forgotten_state
    trace = fresh.get_trace(pid, "ctx-s2")
    assert trace is not None and SECRET not in str(trace) and "the cache is Redis" in str(trace)


def test_the_sources_tombstones_go_along(tmp_path: Path, project_id: str) -> None:
    """Live, copied to a new store, hands it its tombstones: the backup copied there next
    is refused the same way."""
    pid = project_id
    bak, live, other = (SQLiteStore(str(tmp_path / f"{n}.db")) for n in ("b", "l", "o"))
    try:
        ids = _populate(bak, pid)
        copy_project(bak, live, pid)
        live.forget(pid, session_id="s1")
        assert all(c.matches for c in copy_project(live, other, pid).values())
        assert other.forgotten_ids(pid, [ids["a"], ids["b"]]) == {ids["a"]}
        counts = copy_project(bak, other, pid)
        assert all(c.matches for c in counts.values()), counts
        assert counts["events"].forgotten == 2
        assert _snapshot(other, pid) == _snapshot(live, pid)
    finally:
        for store in (bak, live, other):
            store.close()


def test_a_session_used_again_after_its_forget_is_copied(tmp_path: Path, project_id: str) -> None:
    """A session id written again after its forget keeps its tombstone; the destination
    holds it, so the source's row and its events the destination never forgot are copied."""
    pid = project_id
    bak, live = SQLiteStore(str(tmp_path / "b.db")), SQLiteStore(str(tmp_path / "l.db"))
    try:
        write(live, make_event(pid, "s1", "first life of s1"))
        live.forget(pid, session_id="s1")
        write(live, make_event(pid, "s1", "second life of s1"))
        assert live.forgotten_ids(pid, ["s1"], ("session",)) == {"s1"}
        old, new = make_event(pid, "s1", "first life of s1"), make_event(pid, "s1", "other")
        write(bak, old, new)
        counts = copy_project(bak, live, pid)
        assert counts["events"].forgotten == 1 and counts["sessions"].forgotten == 0
        texts = {e.text for e in live.list_events(pid, "s1")}
        assert texts == {"second life of s1", "other"}
    finally:
        bak.close()
        live.close()


def test_words_of_a_forgotten_message_leave_the_reply_it_indexed(
    tmp_path: Path, project_id: str
) -> None:
    """A reply indexed with the words of the message it follows (its item's context) is
    copied without them when that message was forgotten there, as the forget dropped them."""
    pid = project_id
    bak, live, fresh = (SQLiteStore(str(tmp_path / f"{n}.db")) for n in ("b", "l", "f"))
    try:
        q = make_event(pid, "s", "which zqxpay ledger holds refunds", ts=1.0)
        r = make_event(pid, "s", "the second one", ts=2.0, type="assistant_message")
        bak.write_events([q, r], [event_items(q), event_items(r, context=(q.id, q.text or ""))])
        item = next(i for b in bak.export_rows(pid, "items") for i in b if i["item_id"] == r.id)
        assert item["context_id"] == q.id and "zqxpay" in item["context_terms"]
        copy_project(bak, live, pid)
        live.forget(pid, event_ids=[q.id])
        fresh.import_rows(pid, "tombstones", [t for b in live.export_rows(pid, "tombstones")
                                              for t in b])  # fmt: skip
        counts = copy_project(bak, fresh, pid)
        assert all(c.matches for c in counts.values()), counts
        assert counts["items"].forgotten == 1 and counts["items"].redacted == 1
        assert _snapshot(fresh, pid) == _snapshot(live, pid)
        assert fresh.keyword_search(pid, match("zqxpay"), None, 9) == []
        assert [h.item_id for h in fresh.keyword_search(pid, match("second"), None, 9)] == [r.id]
    finally:
        for store in (bak, live, fresh):
            store.close()


def test_a_session_used_again_gets_nothing_of_its_forgotten_life_back(
    stores: tuple[Store, Store, Store], project_id: str
) -> None:
    """A session forgotten and then written to again: a backup taken before the forget
    brings back none of its first life (its task, facts and traces: older than the
    forget), counts them as left out, and counts what the destination wrote of the second
    life as its own, so the count check passes."""
    bak, live, _ = stores
    pid = project_id
    _populate(bak, pid)
    copy_project(bak, live, pid)
    live.forget(pid, session_id="s1")
    write(live, make_event(pid, "s1", "a second life", ts=30.0))
    live.set_state(StateFact(project_id=pid, scope="session", scope_id="s1", key="mood",
                             value="new"))  # fmt: skip
    live.put_trace(pid, "ctx-s1-again", {"session_id": "s1", "intent": "second"})
    again = _snapshot(live, pid)

    counts = copy_project(bak, live, pid, batch=2)

    assert all(c.matches for c in counts.values()), counts
    assert _snapshot(live, pid) == again  # nothing of the first life written back
    assert counts["tasks"].forgotten == 1 and counts["tasks"].written == 0
    # s1's mood (its one version) and t1's step, besides what the forget dropped then
    assert counts["state"].forgotten == 4 and counts["state"].written == 0
    assert counts["state_history"].forgotten == 5 and counts["state_history"].written == 0
    assert counts["traces"].forgotten == 1 and counts["traces"].written == 0
    # the second life: its event, its item, its mood (one version), its trace
    own = {t: c.own for t, c in counts.items() if c.own and t != "tombstones"}
    assert own == {"events": 1, "items": 1, "state": 1, "state_history": 1, "traces": 1}
    assert counts["sessions"].forgotten == 0 and counts["sessions"].already == 2  # s1, s2
    mood = live.get_state(pid, "session", "s1", "mood")
    assert [f.value for f in mood] == ["new"]
    assert live.get_trace(pid, "ctx-s1") is None
