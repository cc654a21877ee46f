"""Builders shared by the storage contract tests: events and entities with their search items,
made the way ContextBase makes them (keyed event ids, retrieve.indexing items)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ctxbase import ContextBase
from ctxbase.assemble.facts import RuleFactExtractor
from ctxbase.assemble.manager import ContextManager
from ctxbase.model import Entity, Event, Relation, keyed_event_id, make_entity_id
from ctxbase.retrieve.indexing import entity_items, event_items
from ctxbase.retrieve.tokenize import fts_match_expression, query_terms
from ctxbase.store.base import SearchItem, Store
from ctxbase.store.postgres import PostgresStore
from ctxbase.store.sqlite import SQLiteStore


def make_event(project_id: str, session_id: str, text: str, **fields: Any) -> Event:
    fields.setdefault("type", "user_message")
    parents = list(fields.get("parent_event_ids", []))
    # Keyed by content, so building the same event twice is a retry of one capture.
    key = json.dumps([fields["type"], text, fields.get("data"), sorted(parents)], sort_keys=True)
    eid = keyed_event_id(project_id, session_id, key)
    return Event(id=eid, project_id=project_id, session_id=session_id, text=text, **fields)


def write(store: Store, *events: Event) -> list[Event]:
    return store.write_events(list(events), [event_items(e) for e in events])


def add_entity(store: Store, project_id: str, type: str, name: str, text: str, **kw: Any) -> Entity:
    entity = Entity(id=make_entity_id(type, name), project_id=project_id, type=type, name=name,
                    text=text, **kw)  # fmt: skip
    return store.upsert_entity(entity, entity_items(entity))


def match(query: str, mode: str = "or") -> str:
    expr = fts_match_expression(query_terms(query), "and" if mode == "and" else "or")
    assert expr is not None, query
    return expr


def item(project_id: str, item_id: str, text: str, **kw: Any) -> SearchItem:
    """A bare search item (for entities' chunks or direct index tests)."""
    from ctxbase.retrieve.tokenize import index_terms

    kw.setdefault("owner_id", item_id)
    kw.setdefault("kind", "event")
    kw.setdefault("type", "note")
    kw.setdefault("ts", 1000.0)
    return SearchItem(item_id=item_id, text=text, terms=" ".join(index_terms(text)), **kw)


def relation(
    project_id: str, a: str, b: str, type: str, at: float, confidence: float = 0.9
) -> Relation:
    """An open relation a -> b created (and valid) from `at`."""
    return Relation(project_id=project_id, from_id=a, type=type, to_id=b, confidence=confidence,
                    source="human", created_at=at, valid_from=at)  # fmt: skip


def assembly_project(cb: ContextBase) -> str:
    """A session with a current task, a suspended one, messages and facts in every scope."""
    cm = ContextManager(cb, extractor=RuleFactExtractor())
    sid = cm.create_session("alice")
    cm.switch_task(sid, "draft the refund report")
    cm.set_state(sid, "audience", "finance")  # the draft task's fact
    cm.switch_task(sid, "ship the refund report")
    for n in range(6):
        cm.add_message(sid, "user", f"message {n}: the refund report needs column {n}")
        cm.add_message(sid, "assistant", f"ok {n}, adding column {n}")
    cm.set_state(sid, "owner", "alice")
    cm.set_state(sid, "format", "csv", scope="session")
    cm.set_state(sid, "region", "eu", scope="project")
    cb.flush()  # capture anchoring done: its store calls are not an assembly's
    cb.wait_for_embeddings()
    return sid


@contextmanager
def fresh_database(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[
    tuple[Callable[[], Store], Callable[[str], None]]
]:  # fmt: skip
    """(open a store, run a statement) on a database of its own: the schema version is
    the whole database's."""
    if backend == "sqlite":
        path = tmp_path / "old.db"

        def run_sqlite(sql: str) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(sql)

        yield (lambda: SQLiteStore(str(path))), run_sqlite
        return
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from ctxbase.store.postgres import PostgresStore

    pg_url = request.getfixturevalue("pg_url")
    name = f"chars_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = make_conninfo(**{**conninfo_to_dict(pg_url), "dbname": name})

    def run_pg(sql: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]  # a test's own literal

    try:
        yield (lambda: PostgresStore(url, max_size=2)), run_pg
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def open_store(kind: str, path: Path, pg_url: str | None) -> Store:
    """A store object of its own: the SQLite file at `path`, or the PostgreSQL database."""
    if kind == "sqlite":
        return SQLiteStore(str(path))
    assert pg_url is not None
    return PostgresStore(pg_url, max_size=2)


# The backend pairs a copy between two stores is tested on (migrate-data).
COPY_PAIRS = ["sqlite->sqlite", "sqlite->postgres", "postgres->sqlite"]


def store_pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    """The two stores of a `COPY_PAIRS` param (`request.param`), first and second, each of
    its own; closed after the test. For a fixture parametrised by COPY_PAIRS."""
    first_kind, second_kind = request.param.split("->")
    url = request.getfixturevalue("pg_url") if "postgres" in request.param else None
    first = open_store(first_kind, tmp_path / "first.db", url)
    second = open_store(second_kind, tmp_path / "second.db", url)
    try:
        yield first, second
    finally:
        first.close()
        second.close()
