"""Every statement the PostgreSQL backend sends to a project-keyed table names the project
(in WHERE / ON, or in the inserted columns and the ON CONFLICT target), so Citus can route it
to one shard group. Recorded over a workload that calls every Store method."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from contract_helpers import add_entity, make_event, match, write

from ctxbase.model import Relation, SessionInfo, StateFact, TaskInfo
from ctxbase.retrieve.indexing import event_items
from ctxbase.store.base import EventRetext, ItemFilter, KnowledgeView
from ctxbase.store.pg_base import CROSS_PROJECT
from ctxbase.store.postgres import PostgresStore
from ctxbase.store.schema import GLOBAL_TABLES, TABLES
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project

_REF = re.compile(r"\b(FROM|JOIN|INTO|UPDATE)\s+(\w+)(?:\s+(?:AS\s+)?(\w+))?", re.IGNORECASE)
_KEYWORDS = {"where", "set", "on", "join", "using", "group", "order", "limit", "union", "values"}


def _workload(store: PostgresStore, pid: str, tmp_path: Path) -> None:
    store.ensure_project(pid)
    store.list_projects()
    store.list_repos(pid)
    store.upsert_session(SessionInfo(project_id=pid, session_id="s1"))
    store.get_session(pid, "s1")
    store.list_sessions(pid)
    store.upsert_task(TaskInfo(project_id=pid, task_id="t1", session_id="s1"))
    store.get_task(pid, "t1")
    store.list_tasks(pid, "s1")
    a = make_event(pid, "s1", "缓存 alpha")
    b = make_event(pid, "s1", "beta", parent_event_ids=[a.id], refers_to=[a.id])
    write(store, a, b)
    write(store, a)
    store.existing_ids(pid, [a.id, "x"])
    store.get_events(pid, [a.id, b.id])
    store.list_events(pid, "s1", last_n=1, types=["user_message"], task_id=None, since=0.0)
    store.list_events(pid)
    ent = add_entity(store, pid, "document", "d", "gamma")
    store.get_entities(pid, [ent.id])
    store.list_entities(pid, type="document", name="d", limit=3)
    (rel,) = store.upsert_relations(
        [Relation(project_id=pid, from_id=ent.id, type="MENTIONS", to_id=a.id, source="h")]
    )
    store.list_relations(pid, [a.id], direction="in", types=["MENTIONS"], min_confidence=0.1)
    store.list_relations(pid, [a.id], direction="both")
    store.list_relations(pid, include_closed=True)
    store.close_relation(pid, rel.id, 1.0)
    flt = ItemFilter(session_ids=("s1",), path_prefix="", since=0.0, latest_only=True)
    store.keyword_search(pid, match("缓存 beta"), flt, 5)
    store.keyword_search(pid, match("alpha"), None, 5)
    store.filter_item_ids(pid, flt)
    store.get_items(pid, [a.id])
    store.count_items(pid)
    pending = store.pending_embeddings("m", 10, pid)
    store.pending_embeddings("m", 10)
    store.pending_projects("m")
    store.put_vectors("m", [(p, i, np.ones(16, dtype=np.float32)) for p, i, _ in pending])
    list(store.iter_vectors(pid, "m"))
    store.vector_search(pid, "m", np.ones(16, dtype=np.float32), 3)
    store.vector_search(pid, "m", np.ones(16, dtype=np.float32), 3, {a.id})
    store.index_generation(pid)
    store.touch_index(pid)
    view = KnowledgeView(("r",), hidden_owner_ids=("x",), shown_owner_ids=("y",))
    store.filter_item_ids(pid, ItemFilter(latest_only=True, view=view))
    turn = make_event(pid, "s1", "", type="assistant_message", data={"tool_calls": 1})
    write(store, turn)
    store.pending_upgrades()
    store.textless_events("assistant_message", None, 5)
    store.textless_events("assistant_message", (pid, turn.id), 5)
    change = EventRetext(
        turn.id, "ls()", {}, event_items(turn.model_copy(update={"text": "ls()"})), "ls"
    )
    store.retext_events(pid, [change])
    store.mark_upgrade("x")
    store.finish_upgrade("x")
    store.set_active(pid, [b.id], False)
    store.set_active(pid, [b.id], True)
    store.set_state(StateFact(project_id=pid, scope="session", scope_id="s1", key="k", value=1))
    store.get_state(pid, "session", "s1")
    store.get_states(pid, [("session", "s1"), ("task", "t1")])
    store.state_history(pid, "session", "s1", "k")
    store.delete_state(pid, "session", "s1", "k", "why")
    store.put_trace(pid, "c", {"x": 1})
    store.get_trace(pid, "c")
    lite = SQLiteStore(str(tmp_path / "filter.db"))
    try:
        copy_project(store, lite, pid)
        lite.forget(pid, whole_project=True)
        copy_project(lite, store, pid)  # into rows already present
        copy_project(lite, store, pid, bulk=True)  # the vector index built after the copy
    finally:
        lite.close()
    store.forget(pid, event_ids=[b.id])
    store.forget(pid, entity_ids=[ent.id])
    store.forget(pid, session_id="s1")
    store.forget(pid, whole_project=True)
    store.schema_version()


def _parts(flat: str) -> list[str]:
    """A statement's parts: for `WITH a AS (...), b AS (...) main`, each body and the main
    statement (each is checked on its own); else the statement itself."""
    if not flat.upper().startswith("WITH "):
        return [flat]
    parts, at = [], 5
    while (head := re.match(r"\s*,?\s*\w+\s+AS\s*\(", flat[at:], re.IGNORECASE)) is not None:
        start, depth = at + head.end() - 1, 0
        for end in range(start, len(flat)):  # the parenthesis closing the body
            depth += {"(": 1, ")": -1}.get(flat[end], 0)
            if depth == 0:
                break
        parts.append(flat[start + 1 : end])
        at = end + 1
    return [*parts, flat[at:].strip()]


def _problems(sql: str) -> list[str]:
    """Why a statement on project tables does not pin the project (empty when it does)."""
    parts = _parts(" ".join(sql.split()))
    if len(parts) > 1:
        return [p for part in parts for p in _problems(part)]
    flat = parts[0]
    out = []
    refs = [(t.lower(), (al or "").lower()) for _, t, al in _REF.findall(flat)]
    keyed = [(t, al) for t, al in refs if t in TABLES]
    if flat.upper().startswith("INSERT"):
        cols = re.search(r"INSERT INTO \w+\s*\(([^)]*)\)", flat, re.IGNORECASE)
        if not cols or "project_id" not in cols.group(1):
            out.append("insert without project_id")
        conflict = re.search(r"ON CONFLICT\s*\(([^)]*)\)", flat, re.IGNORECASE)
        if conflict and "project_id" not in conflict.group(1):
            out.append("ON CONFLICT target without project_id")
        return out
    bare = len(re.findall(r"(?<![.\w])project_id\s*(?:=|IN\b)", flat, re.IGNORECASE))
    for table, alias in keyed:
        if alias and alias not in _KEYWORDS:
            if not re.search(rf"\b{alias}\.project_id\s*=", flat, re.IGNORECASE):
                out.append(f"{table} {alias} not filtered by project_id")
        elif bare == 0:
            out.append(f"{table} not filtered by project_id")
        else:
            bare -= 1
    return out


def test_every_statement_filters_by_project(pg_url: str, project_id: str, tmp_path: Path) -> None:
    sent: list[str] = []
    store = PostgresStore(pg_url, max_size=2, on_statement=sent.append)
    try:
        _workload(store, project_id, tmp_path)
    finally:
        store.close()
    assert len(sent) > 150
    touched = {t.lower() for s in sent for _, t, _ in _REF.findall(s)}
    assert set(TABLES) <= touched  # the workload reached every project table
    cross = [s for s in sent if s.startswith(CROSS_PROJECT)]
    assert {" ".join(s.split()[4:7]) for s in cross} == {
        "project_id FROM projects",  # list_projects
        "project_id, item_id, text",  # the embedding worker's queue across projects
        "p.project_id FROM projects",  # ... and the projects it serves in turn
        "indexname FROM pg_indexes",  # bulk load: the vector indexes it defers
        "event_id, session_id, task_id,",  # an upgrade step's turns without text
        "dim, count(*) FROM",  # ... and the dimensions to build them for, sized
    }
    bad = {}
    checked = 0
    for sql in set(sent) - set(cross):
        tables = {t.lower() for _, t, _ in _REF.findall(sql)}
        if tables and tables <= set(GLOBAL_TABLES):
            continue
        checked += 1
        problems = _problems(sql)
        if problems:
            bad[sql] = problems
    assert checked > 80  # distinct statements
    assert bad == {}


def test_the_checker_catches_unfiltered_statements() -> None:
    assert _problems("SELECT count(*) FROM items WHERE active=1")
    assert _problems("DELETE FROM relations WHERE from_id = ANY(%s)")
    assert _problems(
        "SELECT v.item_id FROM item_vectors v JOIN items i ON i.item_id = v.item_id "
        "WHERE v.project_id=%s"
    )
    assert _problems("INSERT INTO tombstones(hashed_id) VALUES (%s)")
    assert not _problems("SELECT 1 FROM events e WHERE e.project_id = %s AND e.active = 0")
    # each part of a statement with a WITH clause on its own
    cte = (
        "WITH a AS (SELECT project_id FROM projects WHERE {cond} FOR NO KEY UPDATE), "
        "b AS (SELECT (1)) INSERT INTO traces(project_id, context_id) SELECT %s, %s FROM a, b "
        "ON CONFLICT (project_id, context_id) DO NOTHING"
    )
    assert not _problems(cte.format(cond="project_id = %s"))
    assert _problems(cte.format(cond="generation > 0"))
