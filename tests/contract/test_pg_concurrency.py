"""Eight writer and eight reader processes on one PostgreSQL database: every acknowledged
event is stored, sessions stay gap-free, and readers never fail."""

from __future__ import annotations

import multiprocessing
import queue
import time
from typing import Any

from contract_workers import pg_reader, pg_writer

from ctxbase.store.postgres import PostgresStore

WRITERS = 8
READERS = 8
EVENTS = 200


def _collect(out: Any, group: list[Any], procs: list[Any], n: int) -> list[Any]:
    """n results from the queue; fails at once when any process died without reporting."""
    got: list[Any] = []
    deadline = time.monotonic() + 900  # a hang guard, not a speed target (that is bench/)
    while len(got) < n:
        try:
            got.append(out.get(timeout=1))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not dead, f"worker processes failed: exit codes {dead}"
            assert time.monotonic() < deadline, "workers did not finish in time"
    return got


def test_writers_and_readers_in_parallel(pg_url: str, project_id: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    start, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    writers = [
        ctx.Process(target=pg_writer, args=(pg_url, project_id, w, EVENTS, start, out))
        for w in range(WRITERS)
    ]
    readers = [
        ctx.Process(target=pg_reader, args=(pg_url, project_id, r, stop, start, out))
        for r in range(READERS)
    ]
    procs = writers + readers
    for p in procs:
        p.start()
    t0 = time.monotonic()
    start.set()
    results: list[tuple[str, int, object]] = []
    try:
        results += _collect(out, writers, procs, len(writers))
        stop.set()
        results += _collect(out, readers, procs, len(readers))
    finally:
        stop.set()
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
    elapsed = time.monotonic() - t0
    print(f"8 writers x {EVENTS} events with 8 readers: {elapsed:.1f}s")
    assert [p.exitcode for p in procs] == [0] * len(procs)
    acked = {eid for kind, _, ids in results if kind == "writer" for eid in ids}  # type: ignore[attr-defined]
    assert len(acked) == WRITERS * EVENTS  # every text differs, so every id does
    assert all(n >= 5 for kind, _, n in results if kind == "reader")  # type: ignore[operator]

    store = PostgresStore(pg_url, max_size=2)
    try:
        stored = store.list_events(project_id)
        assert {e.id for e in stored} == acked
        for session in ["shared", *(f"own{w}" for w in range(WRITERS))]:
            seqs = [e.seq for e in store.list_events(project_id, session)]
            assert seqs == list(range(1, len(seqs) + 1)), session
        nexts = store.list_relations(project_id, types=["NEXT"])
        assert len(nexts) == len(acked) - (WRITERS + 1)  # one chain per session
        assert store.count_items(project_id) == len(acked)
    finally:
        store.close()
