"""The capture bus: non-blocking capture, priorities, aggregation, backpressure, dedup, flush."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from core_helpers import count, raw

from ctxbase import ConflictError, ContextBase, CtxbaseError
from ctxbase.capture.bus import BusConfig

Opener = Callable[..., ContextBase]


@contextmanager
def write_lock_held(path: Path) -> Iterator[sqlite3.Connection]:
    """Hold SQLite's write lock from another connection, so the writer cannot commit."""
    conn = raw(path)
    conn.isolation_level = None
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def test_capture_returns_at_once_and_flush_puts_it_on_disk(db_path: Path, cb: ContextBase) -> None:
    ids = [cb.capture("user_message", session_id="s", text=f"m{i}") for i in range(50)]
    assert all(isinstance(i, str) for i in ids)
    cb.flush()
    # read through a separate connection: the rows are committed, not just cached
    assert count(db_path, "events") == 50
    assert [e.text for e in cb.last_events("s", 50)] == [f"m{i}" for i in range(50)]


def test_flush_does_not_wait_out_the_writer_linger(db_path: Path, open_base: Opener) -> None:
    # The writer lingers to batch bursts; a flush (and so a SIGTERM shutdown) must cut that
    # short: with a 30 s linger this flush used to take the whole 30 s.
    cb = open_base(bus_config=BusConfig(linger_s=30.0, batch_size=10_000))
    for i in range(50):
        cb.capture("user_message", session_id="s", text=f"lingering {i}")
    started = time.monotonic()
    cb.flush()
    assert time.monotonic() - started < 10.0
    assert count(db_path, "events") == 50


def test_capture_does_not_wait_for_a_locked_database(db_path: Path, cb: ContextBase) -> None:
    cb.record("user_message", session_id="s", text="warm up")  # schema and connection ready
    with write_lock_held(db_path):
        start = time.perf_counter()
        for i in range(200):
            cb.capture("assistant_message", session_id="s", text=f"while locked {i}")
        elapsed = time.perf_counter() - start
        assert elapsed < 0.5, f"200 captures took {elapsed:.3f}s with the file locked"
        assert count(db_path, "events") == 1
    cb.flush(timeout=30)
    assert count(db_path, "events") == 201


def test_a_child_of_an_event_the_writer_is_still_committing_is_accepted(
    db_path: Path, cb: ContextBase
) -> None:
    cb.record("user_message", session_id="s", text="warm up")
    with write_lock_held(db_path):
        parent = cb.capture("user_message", session_id="s", text="parent")
        assert parent is not None
        # the writer has taken the parent off the queue and waits for the lock to commit it
        wait_until(lambda: cb.capture_stats().queue_depth == 0)
        child = cb.capture(
            "tool_invocation", session_id="s", text="child", parent_event_ids=[parent]
        )
        with pytest.raises(CtxbaseError, match="does not exist"):
            cb.capture("tool_invocation", session_id="s", text="x", parent_event_ids=["ev_nope"])
    cb.flush(timeout=30)
    assert child is not None
    assert [e.id for e in cb.causal_chain(child)] == [parent]


def test_an_unknown_embedder_fails_at_open_and_none_means_no_vectors(db_path: Path) -> None:
    with pytest.raises(CtxbaseError, match="unknown embedder 'nope'") as err:
        ContextBase(str(db_path), embedder="nope")
    assert getattr(err.value, "field", None) == "embedder"
    cb = ContextBase(str(db_path), embedder="none")
    try:
        cb.record("user_message", session_id="s", text="keyword only")
        assert cb.embedder is None and cb.embedding_worker is None
        assert cb.search("keyword").results
    finally:
        cb.close()


def test_record_is_synchronous_and_keeps_session_order(db_path: Path, cb: ContextBase) -> None:
    queued = cb.capture("user_message", session_id="s", text="queued first")
    ev = cb.record(
        "assistant_message", session_id="s", text="recorded second", parent_event_ids=[queued]
    )
    assert ev.seq == 2
    # no flush: record() already wrote both, queued one first
    conn = raw(db_path)
    rows = conn.execute("SELECT event_id, seq FROM events ORDER BY seq").fetchall()
    conn.close()
    assert rows == [(queued, 1), (ev.id, 2)]


def test_a_retry_with_the_same_key_is_written_once(db_path: Path, cb: ContextBase) -> None:
    a = cb.capture("user_message", session_id="s", text="retry me", idempotency_key="k1")
    b = cb.capture("user_message", session_id="s", text="retry me", idempotency_key="k1")
    cb.flush()
    # retried after the write (other content under the key is a conflict: test_event_identity)
    c = cb.capture("user_message", session_id="s", text="retry me", idempotency_key="k1")
    d = cb.record("user_message", session_id="s", text="retry me", idempotency_key="k1")
    cb.flush()
    assert a == b == c == d.id
    assert d.text == "retry me" and d.seq == 1  # the event stored the first time
    assert count(db_path, "events") == 1
    assert count(db_path, "items") == 1
    assert count(db_path, "item_fts") == 1
    stats = cb.capture_stats()
    assert stats.written == 1
    assert stats.duplicates >= 2


def test_the_same_content_captured_again_is_a_new_event(db_path: Path, cb: ContextBase) -> None:
    a = cb.capture("user_message", session_id="s", text="again")
    b = cb.capture("user_message", session_id="s", text="again")
    cb.flush()
    c = cb.record("user_message", session_id="s", text="again")
    assert len({a, b, c.id}) == 3
    assert [e.seq for e in cb.last_events("s")] == [1, 2, 3]
    assert count(db_path, "events") == 3


def test_retry_from_another_process_view_is_deduplicated(db_path: Path, open_base: Opener) -> None:
    first = open_base()
    second = open_base()  # another handle on the same file, as a second worker would have
    a = first.capture("tool_result", session_id="s", text="exit 0", idempotency_key="run-7")
    first.flush()
    b = second.capture("tool_result", session_id="s", text="exit 0", idempotency_key="run-7")
    second.flush()
    assert a == b
    assert count(db_path, "events") == 1


def test_priorities_low_events_aggregate_high_ones_never(db_path: Path, open_base: Opener) -> None:
    cb = open_base(bus_config=BusConfig(linger_s=0.5, aggregate_window_s=5.0))
    u = cb.capture("user_message", session_id="s", text="question")
    # a HIGH event ends the writer's linger at once: written first, so the burst that
    # follows waits out the linger together (a loaded machine took t1 alone otherwise)
    cb.flush()
    t1 = cb.capture(
        "internal_thought",
        session_id="s",
        text="thinking a",
        agent_id="planner",
        parent_event_ids=[u],
    )
    t2 = cb.capture(
        "internal_thought",
        session_id="s",
        text="thinking b",
        agent_id="planner",
        parent_event_ids=[u],
        importance=0.8,
    )
    t3 = cb.capture(
        "internal_thought",
        session_id="s",
        text="thinking c",
        agent_id="planner",
        parent_event_ids=[u],
    )
    other = cb.capture(
        "internal_thought",
        session_id="s",
        text="other agent",
        agent_id="critic",
        parent_event_ids=[u],
    )
    r1 = cb.capture("tool_result", session_id="s", text="same", parent_event_ids=[u])
    r2 = cb.capture("tool_result", session_id="s", text="same again", parent_event_ids=[u])
    cb.flush()
    # each capture keeps its own id, and each of them names the event they were merged into
    assert len({t1, t2, t3, other}) == 4
    assert r1 != r2
    merged = cb.get_event(t1)  # type: ignore[arg-type]
    assert [cb.get_event(t).id for t in (t2, t3)] == [t1, t1]  # type: ignore[arg-type]
    assert cb.get_event(other).id == other  # type: ignore[arg-type]
    assert merged.text == "thinking a\nthinking b\nthinking c"
    assert merged.metadata["aggregated_count"] == 3
    assert merged.importance == 0.8
    assert [e.type for e in cb.last_events("s", 10)] == [
        "user_message",
        "internal_thought",
        "internal_thought",
        "tool_result",
        "tool_result",
    ]
    assert cb.capture_stats().aggregated == 2
    assert count(db_path, "events") == 5


def test_low_events_outside_the_window_are_not_aggregated(open_base: Opener) -> None:
    cb = open_base(bus_config=BusConfig(linger_s=0.5, aggregate_window_s=0.05))
    a = cb.capture("internal_thought", session_id="s", text="first")
    time.sleep(0.15)
    b = cb.capture("internal_thought", session_id="s", text="second")
    cb.flush()
    assert a != b
    assert [e.text for e in cb.last_events("s")] == ["first", "second"]


def test_low_events_the_caller_named_are_not_merged_so_a_late_retry_finds_them(
    open_base: Opener,
) -> None:
    cb = open_base(bus_config=BusConfig(linger_s=0.5, aggregate_window_s=5.0))

    def thought(text: str, **named: str) -> str | None:
        return cb.capture("internal_thought", session_id="s", text=text, **named)

    a = thought("step one", idempotency_key="t1")
    b = thought("step two", idempotency_key="t2")
    b_again = thought("step two", idempotency_key="t2")  # a retry while it is queued
    c = thought("step three", event_id="ev_step3")
    d = thought("step four")  # unnamed: it may still join a burst, but not a named event
    e = thought("step five")
    cb.flush()
    assert len({a, b, c, d, e}) == 5 and b == b_again and c == "ev_step3"
    assert cb.get_event(e).id == d  # type: ignore[arg-type]
    assert cb.capture_stats().aggregated == 1
    # retries after the write: each named event is found stored, nothing is added
    assert thought("step two", idempotency_key="t2") == b
    assert thought("step one", idempotency_key="t1") == a
    assert thought("step three", event_id="ev_step3") == c
    assert cb.record("internal_thought", session_id="s", text="step three", event_id=c).seq == 3
    cb.flush()
    texts = [ev.text for ev in cb.last_events("s")]
    assert texts == ["step one", "step two", "step three", "step four\nstep five"]
    assert cb.capture_stats().refused == 0


def test_backpressure_drops_low_counts_them_and_keeps_high(
    db_path: Path, open_base: Opener
) -> None:
    cfg = BusConfig(max_queue=20, batch_size=5, linger_s=0.0, high_priority_wait_s=0.3)
    cb = open_base(bus_config=cfg)
    cb.record("system", session_id="s", text="start")
    with write_lock_held(db_path):
        # the writer takes a first batch and then waits on the lock: the queue fills up
        cb.capture("assistant_message", session_id="s", text="batch 0")
        wait_until(lambda: cb.capture_stats().queue_depth == 0)
        time.sleep(0.05)
        for i in range(20):
            assert cb.capture("assistant_message", session_id="s", text=f"n{i}") is not None
        assert cb.capture_stats().queue_depth == 20
        start = time.perf_counter()
        dropped = cb.capture("internal_thought", session_id="s", text="dropped thought")
        # a dropped LOW event does not wait; a HIGH one would wait high_priority_wait_s (0.3 s)
        assert time.perf_counter() - start < 0.25
        assert dropped is None
        assert cb.capture_stats().dropped_low_priority == 1

        result: dict[str, object] = {}

        def high() -> None:
            t0 = time.perf_counter()
            result["id"] = cb.capture("user_message", session_id="s", text="must survive")
            result["waited"] = time.perf_counter() - t0

        worker = threading.Thread(target=high)
        worker.start()
        time.sleep(0.6)  # longer than high_priority_wait_s: the caller now writes it itself
        assert worker.is_alive()  # ...and that write waits on the same lock
    worker.join(30)
    assert not worker.is_alive()
    assert isinstance(result["id"], str)
    assert float(result["waited"]) >= 0.3  # type: ignore[arg-type]
    cb.flush(timeout=30)
    stats = cb.capture_stats()
    assert stats.written_by_caller == 1
    assert stats.dropped_low_priority == 1
    assert count(db_path, "events", "text='must survive'") == 1
    assert count(db_path, "events", "text='dropped thought'") == 0
    assert count(db_path, "events", "type='assistant_message'") == 21


def test_high_priority_waits_for_room_instead_of_writing_itself(
    db_path: Path, open_base: Opener
) -> None:
    cfg = BusConfig(max_queue=5, batch_size=5, linger_s=0.0, high_priority_wait_s=10.0)
    cb = open_base(bus_config=cfg)
    cb.record("system", session_id="s", text="start")
    lock = write_lock_held(db_path)
    lock.__enter__()
    cb.capture("assistant_message", session_id="s", text="first")
    wait_until(lambda: cb.capture_stats().queue_depth == 0)
    for i in range(5):
        cb.capture("assistant_message", session_id="s", text=f"n{i}")
    done = threading.Event()

    def high() -> None:
        cb.capture("tool_result", session_id="s", text="result")
        done.set()

    worker = threading.Thread(target=high)
    worker.start()
    assert not done.wait(0.3)  # queue full: the high-priority capture waits
    lock.__exit__(None, None, None)  # storage is back: the writer drains, room appears
    assert done.wait(10)
    worker.join()
    cb.flush()
    assert cb.capture_stats().written_by_caller == 0
    assert cb.capture_stats().dropped_low_priority == 0
    assert count(db_path, "events") == 8


def test_flush_covers_everything_captured_before_it(db_path: Path, open_base: Opener) -> None:
    cb = open_base(bus_config=BusConfig(batch_size=7, linger_s=0.001))
    for round_ in range(5):
        for i in range(123):
            cb.capture("assistant_message", session_id="s", text=f"r{round_} e{i}")
        cb.flush()
        assert count(db_path, "events") == 123 * (round_ + 1)


def test_many_threads_capture_concurrently(db_path: Path, cb: ContextBase) -> None:
    n_threads, per_thread = 8, 150
    errors: list[BaseException] = []
    barrier = threading.Barrier(n_threads)

    def worker(k: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                cb.capture(
                    "assistant_message",
                    session_id="shared",
                    text=f"t{k} e{i}",
                    agent_id=f"agent{k}",
                )
                cb.capture("tool_result", session_id=f"own{k}", text=f"t{k} r{i}")
            cb.flush()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    total = n_threads * per_thread
    assert count(db_path, "events") == 2 * total
    conn = raw(db_path)
    seqs = [
        r[0]
        for r in conn.execute(
            "SELECT seq FROM events WHERE session_id='shared' ORDER BY seq"
        ).fetchall()
    ]
    next_edges = conn.execute(
        "SELECT count(*) FROM relations r JOIN events a ON a.event_id=r.from_id "
        "JOIN events b ON b.event_id=r.to_id WHERE r.type='NEXT' AND a.session_id='shared' "
        "AND b.seq = a.seq + 1"
    ).fetchone()[0]
    conn.close()
    assert seqs == list(range(1, total + 1))
    assert next_edges == total - 1
    # each thread's own events keep that thread's order
    for k in range(n_threads):
        mine = [e.text for e in cb.last_events("shared", total) if e.agent_id == f"agent{k}"]
        assert mine == [f"t{k} e{i}" for i in range(per_thread)]


def test_close_flushes_pending_events(db_path: Path, open_base: Opener) -> None:
    cb = open_base()
    for i in range(100):
        cb.capture("user_message", session_id="s", text=f"m{i}")
    cb.close()
    assert count(db_path, "events") == 100


def test_the_writer_commits_in_batches(db_path: Path, cb: ContextBase) -> None:
    cb.record("system", session_id="s", text="start")
    before = cb.store.index_generation("p")  # bumped once per committed write
    for i in range(1000):
        cb.capture("assistant_message", session_id="s", text=f"e{i}")
    cb.flush()
    batches = cb.store.index_generation("p") - before
    assert count(db_path, "events") == 1001
    assert 4 <= batches <= 100, batches  # batches of up to 256, never one per event


def test_capture_after_close_is_an_error(open_base: Opener) -> None:
    cb = open_base()
    cb.close()
    cb.close()  # closing twice is harmless
    with pytest.raises(CtxbaseError):
        cb.capture("user_message", session_id="s", text="too late")
    with pytest.raises(CtxbaseError):
        cb.record("user_message", session_id="s", text="too late")


def test_no_parents_may_be_none_and_one_parent_a_plain_id(cb: ContextBase) -> None:
    first = cb.record("user_message", session_id="s", text="缓存五分钟", parent_event_ids=None).id
    second = cb.record("assistant_message", session_id="s", text="ok", parent_event_ids=first).id
    third = cb.capture("user_message", session_id="s", text="and then", refers_to=None)
    cb.flush()
    assert cb.get_event(second).parent_event_ids == [first]
    assert cb.get_event(first).parent_event_ids == []
    assert third is not None and cb.get_event(third).refers_to == []


def test_a_key_reused_while_its_first_capture_is_queued_is_refused_at_once(
    open_base: Opener,
) -> None:
    """The writer lingers (NORMAL events, a long linger), so the first capture is still
    queued: the second under its key, with other content, is a ConflictError from
    `capture()` itself and nothing of it is queued; an identical retry returns the id."""
    cb = open_base(bus_config=BusConfig(linger_s=5.0))
    first = cb.capture(
        "assistant_message", session_id="s", text="refund 100 EUR", idempotency_key="r-1"
    )
    with pytest.raises(ConflictError, match=r"idempotency key 'r-1' .* different text"):
        cb.capture(
            "assistant_message", session_id="s", text="refund 900 EUR", idempotency_key="r-1"
        )
    again = cb.capture(
        "assistant_message", session_id="s", text="refund 100 EUR", idempotency_key="r-1"
    )
    assert again == first
    cb.flush()
    assert [e.text for e in cb.last_events("s", 10)] == ["refund 100 EUR"]
    assert cb.capture_stats().refused == 0


def test_a_write_lock_held_elsewhere_past_the_timeout_is_a_storage_error(db_path: Path) -> None:
    """Another process holding the file's write lock longer than the busy timeout: the
    write fails with a StorageError saying so (exit 4 on the command line), not a raw
    sqlite3.OperationalError (a traceback, exit 1)."""
    from ctxbase.errors import StorageError
    from ctxbase.store.sqlite import SQLiteStore

    store = SQLiteStore(str(db_path), busy_timeout_s=0.3)
    try:
        store.ensure_project("p")
        with write_lock_held(db_path), pytest.raises(StorageError, match="database is locked"):
            store.ensure_project("q")
        store.ensure_project("q")  # the lock is gone: the write goes through
    finally:
        store.close()


def test_a_current_file_opens_while_another_process_holds_the_write_lock(
    db_path: Path, open_base: Opener
) -> None:
    """Opening a file at the current schema reads it: a search from a second process runs
    while a long write (an ingest, a forget) holds the lock elsewhere."""
    from ctxbase.store.sqlite import SQLiteStore

    first = open_base()
    first.record("user_message", session_id="s", text="the orders cache holds 300 s")
    with write_lock_held(db_path):
        store = SQLiteStore(str(db_path), busy_timeout_s=0.3)  # no write: no StorageError
        try:
            cb = ContextBase(store, project=first.project, embedder="hash")
            assert [h.item.text for h in cb.search("orders cache").results][:1] == [
                "the orders cache holds 300 s"
            ]
            cb.close()
        finally:
            store.close()
