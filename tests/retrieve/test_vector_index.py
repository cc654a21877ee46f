"""Exact and approximate (HNSW) vector search over stored vectors, with each ANN library."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from ctxbase import ContextBase
from ctxbase.retrieve.ann import AnnSettings
from ctxbase.retrieve.ann.hnsw import HnswlibIndex
from ctxbase.retrieve.vector_index import VectorIndex

ANNS = {
    "hnswlib": AnnSettings(library="hnswlib"),
    "usearch-f16": AnnSettings(library="usearch", scalar="f16"),
    "usearch-i8": AnnSettings(library="usearch", scalar="i8"),
}
# How far a similarity read back from the index may be from the stored float32 vector's
SCORE_TOLERANCE = {"hnswlib": 1e-5, "usearch-f16": 2e-3, "usearch-i8": 3e-2}
# Of the 40 exact top-10 ids over four queries, how many each index must find; int8
# quantisation reorders near-ties, and usearch builds in threads, so its graph can vary run to run.
MIN_SHARED = {"hnswlib": 36, "usearch-f16": 36, "usearch-i8": 33}


@pytest.fixture(params=sorted(ANNS))
def ann(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _base(tmp_path: Path, n: int) -> ContextBase:
    cb = ContextBase(
        str(tmp_path / "v.db"), project="p", embedder="hash", background_embedding=False
    )
    topics = ["orders cache", "payment tests", "deploy pipeline", "user profile", "库存 同步"]
    for i in range(n):
        cb.record(
            "user_message",
            session_id=f"s{i % 7}",
            text=f"{topics[i % len(topics)]} note {i} about item {i * 13 % 97}",
        )
    cb.wait_for_embeddings()
    return cb


def test_hnsw_above_the_threshold_agrees_with_exact_search(tmp_path: Path, ann: str) -> None:
    cb = _base(tmp_path, 300)
    try:
        assert cb.embedder is not None
        model = cb.embedder.name
        exact = VectorIndex(cb.store, ann_threshold=10**9)
        approx = VectorIndex(cb.store, ann_threshold=100, ann=ANNS[ann])
        shared = 0
        for q in ["orders cache note", "payment tests item 5", "库存 同步", "deploy"]:
            qv = cb.embedder.embed_query(q)
            want = [i for i, _ in exact.search("p", model, qv, 10)]
            got = [i for i, _ in approx.search("p", model, qv, 10)]
            shared += len(set(want) & set(got))
            assert len(got) == 10
        assert shared >= MIN_SHARED[ann], f"{shared} of 40 exact hits found"
        held = approx._cache[("p", model)].ann
        assert held is not None and held.library == ann.split("-")[0]  # the HNSW path ran
        # A filtered search stays exact: HNSW cannot restrict to a subset.
        allowed = set(want[:3])
        filtered = approx.search("p", model, cb.embedder.embed_query("deploy"), 10, allowed)
        assert {i for i, _ in filtered} <= allowed
    finally:
        cb.close()


def test_the_index_follows_writes(tmp_path: Path) -> None:
    cb = _base(tmp_path, 20)
    try:
        assert cb.embedder is not None
        index = VectorIndex(cb.store)
        qv = cb.embedder.embed_query("a brand new topic: quantum gardening")
        before = index.search("p", cb.embedder.name, qv, 1)
        new = cb.record("user_message", session_id="s", text="a brand new topic: quantum gardening")
        cb.wait_for_embeddings()
        after = index.search("p", cb.embedder.name, qv, 1)
        assert after[0][0] == new.id and before[0][0] != new.id
    finally:
        cb.close()


def test_changing_the_model_re_embeds_everything(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    with ContextBase(path, project="p", embedder="hash:64", background_embedding=False) as cb:
        ids = [cb.record("user_message", session_id="s", text=f"note {i}").id for i in range(5)]
        cb.wait_for_embeddings()
        assert cb.embedder is not None and cb.embedder.dim == 64
    with ContextBase(path, project="p", embedder="hash:128", background_embedding=False) as cb:
        assert cb.embedder is not None
        pending = cb.store.pending_embeddings(cb.embedder.name, 100, "p")
        assert {item_id for _, item_id, _ in pending} == set(ids)
        cb.wait_for_embeddings()
        rows = [r for batch in cb.store.iter_vectors("p", cb.embedder.name) for r in batch]
        assert len(rows) == 5 and all(r.vector.shape == (128,) for r in rows)
        top = cb.search("note 3", preset="semantic", top_k=1).results[0]
        assert top.item.owner_id == ids[3]


def _top(index: VectorIndex, cb: ContextBase, text: str, k: int = 1) -> list[str]:
    assert cb.embedder is not None
    return [i for i, _ in index.search("p", cb.embedder.name, cb.embedder.embed_query(text), k)]


def _hnsw(cb: ContextBase, ann: str) -> tuple[VectorIndex, object]:
    """An index past its HNSW threshold after one search, and its HNSW index."""
    index = VectorIndex(cb.store, ann_threshold=100, ann=ANNS[ann])
    _top(index, cb, "orders cache")
    ann = next(iter(index._cache.values())).ann
    assert ann is not None
    return index, ann


def test_writes_are_appended_without_reloading_the_project(tmp_path: Path) -> None:
    cb = _base(tmp_path, 40)
    try:
        index = VectorIndex(cb.store)
        _top(index, cb, "orders cache")
        assert index.reloads == 1
        for n in range(3):
            text = f"fresh topic {n}: tidal turbines"
            new = cb.record("user_message", session_id="s", text=text)
            cb.wait_for_embeddings()
            assert _top(index, cb, text) == [new.id]
        assert index.reloads == 1  # every write since was appended
        loaded = next(iter(index._cache.values()))
        assert loaded.n == 43 == len(set(loaded.rows.ids))
    finally:
        cb.close()


def test_hidden_forgotten_and_replaced_vectors_reload(tmp_path: Path) -> None:
    cb = _base(tmp_path, 30)
    try:
        index = VectorIndex(cb.store)
        a = cb.record("user_message", session_id="s", text="volcanic glass knives")
        cb.wait_for_embeddings()
        assert _top(index, cb, "volcanic glass knives") == [a.id]
        cb.soft_delete([a.id])
        assert a.id not in _top(index, cb, "volcanic glass knives", 5)
        assert index.reloads == 2
        cb.restore([a.id])
        assert _top(index, cb, "volcanic glass knives") == [a.id]
        assert index.reloads == 3
        # The newest vector is forgotten, then a new one is stored: SQLite would hand out
        # the freed rowid again; the index must neither keep the old nor miss the new one.
        b = cb.record("user_message", session_id="s", text="basalt columns by the sea")
        cb.wait_for_embeddings()
        assert _top(index, cb, "basalt columns by the sea") == [b.id]
        cb.forget(event_ids=[b.id])
        c = cb.record("user_message", session_id="s", text="obsidian arrowheads")
        cb.wait_for_embeddings()
        assert _top(index, cb, "obsidian arrowheads") == [c.id]
        assert b.id not in _top(index, cb, "basalt columns by the sea", 40)
    finally:
        cb.close()


def test_hnsw_takes_appended_vectors_without_a_rebuild(tmp_path: Path, ann: str) -> None:
    cb = _base(tmp_path, 120)
    try:
        index, held = _hnsw(cb, ann)
        new = cb.record("user_message", session_id="s", text="migrating geese over the fjord")
        cb.wait_for_embeddings()
        assert _top(index, cb, "migrating geese over the fjord") == [new.id]
        after = next(iter(index._cache.values()))
        assert after.ann is held and index.reloads == 1
    finally:
        cb.close()


def test_with_hnsw_the_vectors_are_held_once_and_filtered_search_stays_exact(
    tmp_path: Path, ann: str
) -> None:
    cb = _base(tmp_path, 300)
    try:
        assert cb.embedder is not None
        model = cb.embedder.name
        exact = VectorIndex(cb.store, ann_threshold=10**9)
        approx = VectorIndex(cb.store, ann_threshold=100, ann=ANNS[ann])
        qv = cb.embedder.embed_query("payment tests item 5")
        approx.search("p", model, qv, 5)
        loaded = approx._cache[("p", model)]
        # no float32 copy beside the HNSW index: it alone holds the project's vectors
        assert loaded.ann is not None and loaded.matrix is None and loaded.rows.buffer is None
        allowed = {i for i, _ in exact.search("p", model, qv, 40)[::3]}
        want = dict(exact.search("p", model, qv, len(allowed), allowed))
        got = approx.search("p", model, qv, 5, allowed)
        # every allowed row is scored (from the vectors read back, as stored: float16 and
        # int8 round them), so only near-ties may change places
        tolerance = SCORE_TOLERANCE[ann]
        assert len(got) == 5 and {i for i, _ in got} <= allowed
        for item_id, score in got:
            assert abs(score - want[item_id]) <= tolerance
        fifth = sorted(want.values(), reverse=True)[4]
        assert all(want[i] >= fifth - 2 * tolerance for i, _ in got)
        # the order follows the exact scores except where two rows are within the rounding
        # of the stored vectors (the hash embedder makes such near-ties common)
        exact_scores = [want[i] for i, _ in got]
        assert all(a >= b - 2 * tolerance for a, b in itertools.pairwise(exact_scores))
    finally:
        cb.close()


def test_an_index_takes_more_rows_than_its_first_room(tmp_path: Path, ann: str) -> None:
    """hnswlib has a fixed capacity, resized when full; usearch grows by itself. Either way
    nothing is reloaded or rebuilt and old and new rows are found."""
    cb = _base(tmp_path, 120)
    try:
        index, first = _hnsw(cb, ann)
        room = first.capacity - 120 if isinstance(first, HnswlibIndex) else 1024
        news = [
            cb.record("user_message", session_id="t", text=f"a fjord goose number {i} migrates")
            for i in range(room + 5)
        ]
        cb.wait_for_embeddings()
        assert _top(index, cb, "a fjord goose number 3 migrates") == [news[3].id]
        after = next(iter(index._cache.values()))
        assert index.reloads == 1  # rebuilt or grown, not reloaded
        assert after.ann is not None and after.ann.count == 120 + room + 5
        assert after.ann is first  # grown in place, hnswlib by resize_index
        # the old rows came from the index itself and are still found
        exact = VectorIndex(cb.store, ann_threshold=10**9)
        old = "orders cache note 0 about item 0"
        assert _top(index, cb, old) == _top(exact, cb, old)
    finally:
        cb.close()


def test_a_removal_marks_the_row_removed_in_the_index_without_a_rebuild(
    tmp_path: Path, ann: str
) -> None:
    """At 1M rows a rebuild took most of a quarter of an hour: a forgotten or hidden row is
    marked removed in the HNSW index instead, and what is written next is still appended."""
    cb = _base(tmp_path, 150)
    try:
        index = VectorIndex(cb.store, ann_threshold=100, ann=ANNS[ann])
        gone = cb.record("user_message", session_id="s", text="volcanic glass knives")
        hidden = cb.record("user_message", session_id="s", text="basalt columns by the sea")
        cb.wait_for_embeddings()
        assert _top(index, cb, "volcanic glass knives") == [gone.id]
        first = next(iter(index._cache.values())).ann
        cb.forget(event_ids=[gone.id])
        cb.soft_delete([hidden.id])
        new = cb.record("user_message", session_id="s", text="obsidian arrowheads")
        cb.wait_for_embeddings()
        assert _top(index, cb, "obsidian arrowheads") == [new.id]
        for text in ("volcanic glass knives", "basalt columns by the sea"):
            assert not {gone.id, hidden.id} & set(_top(index, cb, text, 20))
        after = next(iter(index._cache.values()))
        assert index.reloads == 1 and after.ann is first and after.n == 153
        assert after.live == 151 and after.dead is not None
        assert int(after.dead.sum()) == 2
        # a filtered search reads the allowed rows' vectors: not the removed ones
        assert cb.embedder is not None
        query = cb.embedder.embed_query("volcanic glass knives")
        allowed = {gone.id, hidden.id, new.id}
        assert [i for i, _ in index.search("p", cb.embedder.name, query, 5, allowed)] == [new.id]
        # a hidden row shown again cannot be unmarked: that reloads, the row live again (read
        # through the allowed rows: usearch builds its graph in threads, and a node of a
        # freshly built graph is now and then not reached by the approximate search)
        cb.restore([hidden.id])
        query = cb.embedder.embed_query("basalt columns by the sea")
        back = index.search("p", cb.embedder.name, query, 1, {hidden.id, new.id})
        assert [i for i, _ in back] == [hidden.id]
        assert index.reloads == 2 and next(iter(index._cache.values())).dead is None
    finally:
        cb.close()


def test_vectors_of_reads_memory_or_the_store_alike(tmp_path: Path, ann: str) -> None:
    cb = _base(tmp_path, 150)
    try:
        assert cb.embedder is not None
        model = cb.embedder.name
        ids = sorted(cb.store.get_vectors("p", model, [f"x{n}" for n in range(3)]))
        assert ids == []  # no such items
        some = [r.item_id for batch in cb.store.iter_vectors("p", model) for r in batch][:5]
        stored = cb.store.get_vectors("p", model, [*some, "missing"])
        assert sorted(stored) == sorted(some)
        cold = VectorIndex(cb.store)  # nothing loaded: read from the store
        assert sorted(cold.vectors_of("p", model, some)) == sorted(some)
        for index, tol in (
            (VectorIndex(cb.store, ann_threshold=10**9), 1e-6),  # exact: the matrix
            (VectorIndex(cb.store, ann_threshold=100, ann=ANNS[ann]), SCORE_TOLERANCE[ann]),
        ):
            index.search("p", model, cb.embedder.embed_query("orders"), 3)  # loads the project
            got = index.vectors_of("p", model, [*some, "missing"])
            assert sorted(got) == sorted(some)
            for i in some:
                assert float(np.abs(got[i] - stored[i]).max()) <= tol * 4
            assert index.vectors_of("p", model, []) == {}
    finally:
        cb.close()


def test_a_query_with_nothing_to_embed_finds_nothing_on_every_store(cb: ContextBase) -> None:
    """A zero vector (an emoji alone for the hashing embedder) has no direction: nothing is
    near it. SQLite's search answered every vector at similarity 0, pgvector none."""
    for text in ("订单已发货", "the cache ttl is 300 seconds", "午饭吃了牛肉面"):
        cb.record("user_message", session_id="s", text=text)
    cb.wait_for_embeddings(timeout=60)
    embedder = cb.searcher.embedder
    assert embedder is not None
    zero = np.zeros(embedder.dim, dtype=np.float32)
    assert cb.searcher.vectors.search(cb.project, embedder.name, zero, 5) == []
    assert not np.any(embedder.embed_query("🚀"))  # what the hashing embedder makes of it
    assert cb.search("🚀", preset="hybrid", top_k=5).results == []
    assert cb.search("cache ttl", preset="semantic", top_k=5).results  # a real query does
