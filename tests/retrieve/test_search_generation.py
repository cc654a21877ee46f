"""One search reads the store's index generation once, however many indexes it consults,
on every backend; a write between two searches is still seen by the next one."""

from __future__ import annotations

import threading

from ctxbase import ContextBase
from ctxbase.retrieve.synced import generation, one_generation
from ctxbase.store.base import ItemFilter
from store_calls import StoreCalls


def _seed(cb: ContextBase) -> None:
    for n in range(6):
        cb.record("user_message", session_id=f"s{n % 2}", text=f"refund report column {n}")
    cb.record("user_message", session_id="s0", text="the payment tests fail in CI")
    cb.flush()  # capture anchoring done: its store calls are not a search's
    cb.wait_for_embeddings()


def test_one_search_reads_the_generation_once(cb: ContextBase) -> None:
    _seed(cb)
    calls = StoreCalls(cb.store)
    shapes = [
        {"preset": "hybrid"},
        {"preset": "hybrid", "filters": ItemFilter(session_ids=("s0",))},  # the screen asks too
        {"preset": "keyword"},
    ]
    for shape in shapes:
        cb.search("refund report", **shape)  # type: ignore[arg-type]  # warm
        calls.reset()
        found = cb.search("refund report", **shape)  # type: ignore[arg-type]
        assert found.results, shape
        assert calls.every["index_generation"] == 1, (shape, dict(calls.every))


def test_a_write_between_searches_is_seen(cb: ContextBase) -> None:
    _seed(cb)
    assert not cb.search("ledger lock", preset="keyword").results
    new = cb.record("user_message", session_id="s1", text="the ledger job holds a lock")
    cb.wait_for_embeddings()
    assert [c.item.owner_id for c in cb.search("ledger lock", preset="keyword").results][:1] == [
        new.id
    ]


def test_one_generation_blocks_are_per_thread_and_nest(cb: ContextBase) -> None:
    _seed(cb)
    pid = cb.project
    calls = StoreCalls(cb.store)
    before = cb.store.index_generation(pid)
    seen: list[int] = []
    with one_generation():
        assert generation(cb.store, pid) == before
        cb.record("user_message", session_id="s1", text="a write inside the block")
        with one_generation():  # joins the outer block: the same reading
            assert generation(cb.store, pid) == before
        # another thread has no block: it reads the store, and sees the write
        worker = threading.Thread(target=lambda: seen.append(generation(cb.store, pid)))
        worker.start()
        worker.join()
    assert seen and seen[0] != before
    assert generation(cb.store, pid) == seen[0]  # outside any block: read again
    # the held reading was taken once for the two in-block calls above
    assert calls.every["index_generation"] == 1 + 1 + 1 + 1  # before, block, thread, after
