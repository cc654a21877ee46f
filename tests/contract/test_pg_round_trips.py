"""PostgreSQL round trips on the assembly's path, counted on the real connection (libpq's
protocol trace: one ReadyForQuery per time the client waited for the server), and planner
statistics after a bulk load."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from contract_helpers import add_entity, make_event, write

from ctxbase.store.postgres import PostgresStore
from ctxbase.store.sqlite import SQLiteStore
from ctxbase.store.transfer import copy_project


@pytest.fixture
def one_conn(pg_url: str) -> Iterator[PostgresStore]:
    """A store whose pool holds a single connection, so every call is traced on it."""
    pg = PostgresStore(pg_url, min_size=1, max_size=1)
    yield pg
    pg.close()


def round_trips(pg: PostgresStore, call: Callable[[], Any]) -> int:
    """How many times `call` waited for the server (ReadyForQuery messages received)."""
    from psycopg import pq

    with tempfile.TemporaryFile(mode="w+") as log:
        with pg._pool.connection() as conn:
            conn.pgconn.trace(log.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            call()
        finally:
            with pg._pool.connection() as conn:
                conn.pgconn.untrace()
        log.seek(0)
        lines = log.read().splitlines()
    return sum(1 for line in lines if line.split("\t")[:1] == ["B"] and "ReadyForQuery" in line)


def test_lone_reads_take_one_round_trip_each(one_conn: PostgresStore, project_id: str) -> None:
    """A read of one statement is sent outside a transaction block: no BEGIN and COMMIT
    round trips around it (under load each costs as much as the read)."""
    pg = one_conn
    ev = make_event(project_id, "s1", "alpha round trips")
    write(pg, ev)
    ent = add_entity(pg, project_id, "document", "spec.md", "beta spec")
    pg.put_vectors("m", [(project_id, ev.id, np.ones(8, dtype=np.float32))])
    query = np.ones(8, dtype=np.float32)
    reads: dict[str, Callable[[], Any]] = {
        "get_items": lambda: pg.get_items(project_id, [ev.id]),
        "get_entities": lambda: pg.get_entities(project_id, [ent.id]),
        "index_generation": lambda: pg.index_generation(project_id),
        "existing_ids": lambda: pg.existing_ids(project_id, [ev.id]),
        "vector_search": lambda: pg.vector_search(project_id, "m", query, 3),
        "list_relations": lambda: pg.list_relations(project_id, [ent.id]),
        "get_session": lambda: pg.get_session(project_id, "s1"),
    }
    counts = {name: round_trips(pg, read) for name, read in reads.items()}
    assert counts == dict.fromkeys(reads, 1)
    # two statements (the events, then their parent links): two round trips, not four
    assert round_trips(pg, lambda: pg.get_events(project_id, [ev.id])) == 2
    # the answers are the same as inside a transaction
    assert [i.item_id for i in pg.get_items(project_id, [ev.id])] == [ev.id]
    found = pg.vector_search(project_id, "m", query, 3)
    assert found is not None and found[0][0] == ev.id
    with pg.transaction():  # inside an open transaction a read joins it
        assert [e.id for e in pg.get_events(project_id, [ev.id])] == [ev.id]


def test_trace_write_is_pipelined(one_conn: PostgresStore, project_id: str) -> None:
    """Every assembly writes its trace: six statements (BEGIN, the commit setting, the
    project's lock, the insert, COMMIT) sent in a pipeline wait at most four times."""
    pg = one_conn
    pg.put_trace(project_id, "ctx-0", {"a": 0})  # the project exists: the usual case
    trips = round_trips(pg, lambda: pg.put_trace(project_id, "ctx-1", {"a": 1}))
    assert 1 <= trips <= 4, trips
    assert pg.get_trace(project_id, "ctx-1") == {"a": 1}


def test_bulk_load_leaves_planner_statistics(tmp_path: Path, pg_url: str) -> None:
    """After copy_project(bulk=True) the loaded tables are analyzed: until autovacuum got to
    them (minutes at 100k events) the planner guessed, and 100k-event assemblies took
    seconds each. A database of its own, autovacuum off, so only the load can analyze."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"bulk_stats_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = make_conninfo(**{**conninfo_to_dict(pg_url), "dbname": name})
    lite = SQLiteStore(str(tmp_path / "src.db"))
    pg = PostgresStore(url, max_size=2)
    try:
        events = [make_event("p", f"s{i % 3}", f"gamma event {i}") for i in range(40)]
        write(lite, *events)
        lite.put_vectors("m", [("p", e.id, np.ones(4, dtype=np.float32)) for e in events])
        with psycopg.connect(url, autocommit=True) as conn:
            for table in ("events", "items", "item_vectors", "relations"):
                conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        copy_project(lite, pg, "p", bulk=True)
        with psycopg.connect(url) as conn:
            analyzed = {
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT tablename FROM pg_stats WHERE schemaname = 'public'"
                ).fetchall()
            }
        assert {"events", "items", "item_vectors"} <= analyzed, analyzed
    finally:
        lite.close()
        pg.close()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
