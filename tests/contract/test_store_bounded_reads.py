"""Reads an assembly makes whose cost must follow what is asked, not the project's size:
a node's first relations per type (`limit_per_node`), the newest entities of a type
(`newest_first`), and the indexes (schema v5) that serve them on both backends."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from contract_helpers import add_entity, relation

from ctxbase.store.base import Store
from ctxbase.store.postgres import PostgresStore
from ctxbase.store.sqlite import SQLiteStore


def _hub(store: Store, project_id: str) -> None:
    """ "hub" is mentioned by 30 events (ev00..ev29, in that order), referenced by 2 code
    entities created last, and mentions one thing itself."""
    rels = [relation(project_id, f"ev{n:02d}", "hub", "MENTIONS", 10.0 + n) for n in range(30)]
    rels += [relation(project_id, f"code{n}", "hub", "REFERENCES", 100.0 + n) for n in range(2)]
    rels += [relation(project_id, "hub", "other", "MENTIONS", 5.0)]
    store.upsert_relations(rels)


def test_limit_per_node_keeps_the_first_of_each_type(store: Store, project_id: str) -> None:
    _hub(store, project_id)
    everything = store.list_relations(
        project_id, ["hub"], direction="in", types=["MENTIONS", "REFERENCES"]
    )
    assert len(everything) == 32
    kept = store.list_relations(
        project_id, ["hub"], direction="in", types=["MENTIONS", "REFERENCES"], limit_per_node=5
    )
    # the late REFERENCES are not crowded out by the many MENTIONS: the limit is per type
    assert [(r.from_id, r.type) for r in kept] == [
        *[(f"ev{n:02d}", "MENTIONS") for n in range(5)],
        ("code0", "REFERENCES"),
        ("code1", "REFERENCES"),
    ]
    assert kept == [r for r in everything if r.type == "REFERENCES" or r.from_id < "ev05"]
    # both sides of the node, each cut on its own
    both = store.list_relations(project_id, ["hub"], types=["MENTIONS"], limit_per_node=2)
    assert [(r.from_id, r.to_id) for r in both] == [
        ("hub", "other"),
        ("ev00", "hub"),
        ("ev01", "hub"),
    ]


def test_limit_per_node_without_types_cuts_each_type_the_node_has(
    store: Store, project_id: str
) -> None:
    _hub(store, project_id)
    store.upsert_relations([relation(project_id, "hub", "spec", "FOLLOWS", 300.0)])
    kept = store.list_relations(project_id, ["hub", "nobody"], limit_per_node=2)
    assert [(r.from_id, r.type, r.to_id) for r in kept] == [
        ("hub", "MENTIONS", "other"),
        ("ev00", "MENTIONS", "hub"),
        ("ev01", "MENTIONS", "hub"),
        ("code0", "REFERENCES", "hub"),
        ("code1", "REFERENCES", "hub"),
        ("hub", "FOLLOWS", "spec"),
    ]
    assert store.list_relations(project_id, ["hub"], direction="out", limit_per_node=1) == [
        r for r in kept if r.from_id == "hub"
    ]
    # a type left out is not read, whatever the node has of it
    no_mentions = store.list_relations(
        project_id, ["hub", "nobody"], limit_per_node=2, exclude_types=["MENTIONS"]
    )
    assert no_mentions == [r for r in kept if r.type != "MENTIONS"]


def test_limit_per_node_applies_after_the_other_conditions(store: Store, project_id: str) -> None:
    _hub(store, project_id)
    store.upsert_relations([relation(project_id, "weak", "hub", "MENTIONS", 1.0, confidence=0.1)])
    closed = store.list_relations(project_id, ["hub"], direction="in", types=["MENTIONS"])[1]
    store.close_relation(project_id, closed.id, at=200.0)
    kept = store.list_relations(
        project_id,
        ["hub"],
        direction="in",
        types=["MENTIONS"],
        min_confidence=0.5,
        limit_per_node=3,
    )
    # the weak edge and the closed one (ev00, the first strong one) are not counted
    assert [r.from_id for r in kept] == ["ev01", "ev02", "ev03"]
    assert len(store.list_relations(project_id, ["hub", "nobody"], direction="in",
                                    types=["MENTIONS"], limit_per_node=0)) == 0  # fmt: skip


def test_limit_per_node_needs_nodes(store: Store, project_id: str) -> None:
    with pytest.raises(ValueError, match="needs node_ids"):
        store.list_relations(project_id, None, types=["MENTIONS"], limit_per_node=3)
    with pytest.raises(ValueError, match="needs types, or None"):
        store.list_relations(project_id, ["hub"], types=[], limit_per_node=3)
    with pytest.raises(ValueError, match=">= 0"):
        store.list_relations(project_id, ["hub"], types=["MENTIONS"], limit_per_node=-1)


def test_newest_first_keeps_the_most_recently_updated(store: Store, project_id: str) -> None:
    # updated in name order: the newest sort last by name
    for n, name in enumerate(["alpha", "eta", "zeta"]):
        add_entity(store, project_id, "document", name, f"text {n}", updated_at=1000.0 + n)
    add_entity(store, project_id, "code", "later_code", "def f(): ...", updated_at=2000.0)
    by_name = store.list_entities(project_id, type="document", limit=2)
    assert [e.name for e in by_name] == ["alpha", "eta"]
    newest = store.list_entities(project_id, type="document", limit=2, newest_first=True)
    assert [(e.name, e.updated_at) for e in newest] == [("zeta", 1002.0), ("eta", 1001.0)]
    everything = store.list_entities(project_id, newest_first=True)
    assert [e.name for e in everything] == ["later_code", "zeta", "eta", "alpha"]


def _sqlite_plan(st: SQLiteStore, call: object) -> str:
    sent: list[str] = []
    conn = st._conn()
    conn.set_trace_callback(sent.append)
    try:
        call()  # type: ignore[operator]
    finally:
        conn.set_trace_callback(None)
    plans = []
    for sql in sent:
        if sql.lstrip().upper().startswith("SELECT"):
            plans += [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql)]
    return " | ".join(plans)


def test_sqlite_bounded_reads_use_the_v5_indexes(tmp_path: Path, project_id: str) -> None:
    st = SQLiteStore(str(tmp_path / "bounded.db"))
    try:
        _hub(st, project_id)
        add_entity(st, project_id, "document", "spec", "a spec")
        st.put_trace(project_id, "ctx_1", {"agent_role": "coder", "task_id": "t1"})
        plan = _sqlite_plan(
            st,
            lambda: st.list_relations(
                project_id, ["hub"], direction="in", types=["MENTIONS"], limit_per_node=3
            ),
        )
        # read in index order; only rows with the same created_at are put in order (by id)
        assert "relations_to_at" in plan and "TEMP B-TREE FOR ORDER BY" not in plan, plan
        plan = _sqlite_plan(
            st, lambda: st.list_entities(project_id, type="document", limit=2, newest_first=True)
        )
        assert "entities_recent" in plan and "TEMP B-TREE FOR ORDER BY" not in plan, plan
        plan = _sqlite_plan(st, lambda: st.latest_context_ids(project_id, ["coder"], task_id="t1"))
        assert "traces_by_task" in plan and "TEMP B-TREE FOR ORDER BY" not in plan, plan
    finally:
        st.close()


def test_postgres_bounded_reads_use_the_v5_indexes(pg_url: str, project_id: str) -> None:
    sent: list[str] = []
    pg = PostgresStore(pg_url, max_size=2, on_statement=sent.append)
    try:
        _hub(pg, project_id)
        sent.clear()
        pg.list_relations(project_id, ["hub"], direction="in", types=["MENTIONS"], limit_per_node=3)
        (sql,) = [s for s in sent if "LATERAL" in s]
        import psycopg

        with psycopg.connect(pg_url) as conn:
            conn.execute("ANALYZE relations")
            conn.execute("SET enable_seqscan = off")  # a tiny table: is the index usable?
            conn.execute("SET enable_bitmapscan = off")
            rows = conn.execute("EXPLAIN " + sql, (["hub"], ["MENTIONS"], project_id, 3))
            plan = " ".join(str(r[0]) for r in rows.fetchall())
        # read in index order: at most rows with the same created_at are put in order by id
        full_sort = re.search(r"(?<!Incremental )Sort  \(", plan)
        assert "relations_to_at" in plan and full_sort is None, plan
    finally:
        pg.close()


def _view_in_python(trace: dict[str, Any]) -> set[str]:
    """What multi_agent_consensus computed from the whole decoded trace."""
    seen = {
        str(c["id"])
        for c in trace.get("candidates", ())
        if c.get("included") and c.get("kind") == "entity"
    }
    return seen | {str(e) for e in (trace.get("outcome") or {}).get("entities", ())}


def test_context_entities_is_read_in_the_database(store: Store, project_id: str) -> None:
    candidates = [
        {"id": "code:a", "kind": "entity", "included": True, "reasons": ["x"]},
        {"id": "code:b", "kind": "entity", "included": False},
        {"id": "ev_1", "kind": "event", "included": True},
        {"id": "doc:c", "kind": "entity", "included": True, "explain": {"deep": [1, [2]]}},
    ]
    traces = {
        "ctx_plain": {"agent_role": "coder", "candidates": candidates},
        "ctx_outcome": {
            "agent_role": "tester",
            "candidates": candidates[:2],
            "outcome": {"entities": ["test:t1", "code:a"], "event_id": "ev_9"},
        },
        "ctx_null_outcome": {"candidates": [], "outcome": None},
        "ctx_bare": {"agent_role": "coder"},
    }
    for context_id, trace in traces.items():
        store.put_trace(project_id, context_id, trace)
    for context_id, trace in traces.items():
        assert store.context_entities(project_id, context_id) == _view_in_python(trace)
    assert store.context_entities(project_id, "ctx_plain") == {"code:a", "doc:c"}
    assert store.context_entities(project_id, "ctx_outcome") == {"code:a", "test:t1"}
    assert store.context_entities(project_id, "ctx_missing") is None
    assert store.context_entities(f"{project_id}-other", "ctx_plain") is None


def test_exclude_types_leaves_those_types_out(store: Store, project_id: str) -> None:
    add_entity(store, project_id, "document", "spec", "the spec")
    add_entity(store, project_id, "code", "handler", "def handler(): ...")
    add_entity(store, project_id, "decision", "use redis", "we use redis")
    add_entity(store, project_id, "mention", "orders", "orders")
    kept = store.list_entities(project_id, exclude_types=("decision", "mention"))
    assert [e.type for e in kept] == ["code", "document"]
    assert store.list_entities(project_id, type="decision", exclude_types=("mention",))
    assert len(store.list_entities(project_id)) == 4
