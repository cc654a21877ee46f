"""PostgreSQL round trips on the assembly's path, counted on the real connection (libpq's
protocol trace: one ReadyForQuery per time the client waited for the server), and planner
statistics after a bulk load."""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from contract_helpers import add_entity, assembly_project, make_event, write

from ctxbase import ContextBase
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
        "forgotten_ids": lambda: pg.forgotten_ids(project_id, [ev.id]),
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


def test_trace_write_is_one_round_trip(one_conn: PostgresStore, project_id: str) -> None:
    """Every assembly writes its trace: one statement (the project's lock, the commit
    setting and the insert) outside a transaction block, so one round trip."""
    pg = one_conn
    pg.put_trace(project_id, "ctx-0", {"a": 0})  # the project exists: the usual case
    assert round_trips(pg, lambda: pg.put_trace(project_id, "ctx-1", {"a": 1})) == 1
    assert pg.get_trace(project_id, "ctx-1") == {"a": 1}
    # a new project is created by the same statement
    fresh = project_id + "-new"
    assert round_trips(pg, lambda: pg.put_trace(fresh, "ctx-2", {"b": 2})) == 1
    assert pg.get_trace(fresh, "ctx-2") == {"b": 2}
    assert fresh in pg.list_projects()
    pg.put_trace(fresh, "ctx-2", {"b": 3})  # written again: replaced
    assert pg.get_trace(fresh, "ctx-2") == {"b": 3}


def test_round_trips_per_assembly(one_conn: PostgresStore, project_id: str) -> None:
    """Every store call of an assembly is a round trip or more: their sum, per shape, has a
    ceiling (what it takes now; before one get_states read, one generation reading per
    search and the trace in one statement: 32 without a session, 30 with one, 37 for a
    planner)."""
    cb = ContextBase(one_conn, project=project_id, embedder="hash", background_embedding=False)
    sid = assembly_project(cb)
    shapes: dict[str, tuple[Callable[[], Any], int]] = {
        "no_session": (
            lambda: cb.assemble_context(agent_role="coder", user_intent="refund column"),
            31,  # 28 before memory read its tool results' calls (two reads at most); +1:
            # the trace read against the tombstones once written (a forget meanwhile)
        ),
        "session": (
            lambda: cb.assemble_context(
                agent_role="coder", user_intent="refund column", session_id=sid
            ),
            26,
        ),
        "planner": (
            lambda: cb.assemble_context(
                agent_role="planner", user_intent="refund report plan", session_id=sid
            ),
            30,  # 26 before memory could recall a turn older than the history window
        ),
    }
    for name, (run, ceiling) in shapes.items():
        for _ in range(6):  # warm: the indexes load, psycopg prepares repeated statements
            run()
        trips = [round_trips(one_conn, run) for _ in range(3)]
        assert min(trips) <= ceiling, (name, trips)  # min: a late prepare adds one-offs


def _waiting(url: str, since: float) -> bool:
    """Whether a backend of this database waits on a lock (put_trace's, in a test)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() - since < 10:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).fetchone()
            if row and row[0]:
                return True
            time.sleep(0.02)
    return False


def test_trace_write_waits_for_the_project_lock(pg_url: str, project_id: str) -> None:
    """The trace is inserted after the project's row lock is taken, as other writes do: a
    writer holding the lock (a forget) holds the trace back until it commits."""
    import psycopg

    pg = PostgresStore(pg_url, min_size=1, max_size=2)
    try:
        pg.put_trace(project_id, "ctx-0", {"a": 0})
        with psycopg.connect(pg_url) as holder:
            holder.execute(
                "SELECT 1 FROM projects WHERE project_id = %s FOR NO KEY UPDATE", (project_id,)
            )
            writer = threading.Thread(target=pg.put_trace, args=(project_id, "ctx-1", {"a": 1}))
            writer.start()
            assert _waiting(pg_url, time.monotonic())
            with psycopg.connect(pg_url, autocommit=True) as other:  # not written yet
                assert not other.execute(
                    "SELECT 1 FROM traces WHERE project_id=%s AND context_id='ctx-1'",
                    (project_id,),
                ).fetchall()
            holder.commit()
            writer.join(10)
        assert pg.get_trace(project_id, "ctx-1") == {"a": 1}
    finally:
        pg.close()


def test_trace_of_a_project_created_meanwhile_is_still_written(
    pg_url: str, project_id: str
) -> None:
    """A project row committed by another writer after the statement began is invisible to
    its lock: nothing is inserted, and the trace is written statement by statement."""
    import psycopg

    sent: list[str] = []
    pg = PostgresStore(pg_url, min_size=1, max_size=2, on_statement=sent.append)
    try:
        with psycopg.connect(pg_url) as creator:
            creator.execute(
                "INSERT INTO projects(project_id, created_at, settings) VALUES (%s, 0, '{}')",
                (project_id,),
            )
            writer = threading.Thread(target=pg.put_trace, args=(project_id, "ctx-1", {"a": 1}))
            writer.start()
            assert _waiting(pg_url, time.monotonic())  # its insert waits on the creator's
            creator.commit()
            writer.join(10)
        assert pg.get_trace(project_id, "ctx-1") == {"a": 1}
        assert any("SET LOCAL synchronous_commit" in s for s in sent)  # the stepwise path
    finally:
        pg.close()


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
