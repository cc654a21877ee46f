"""The query is embedded on its own thread while the search and the assembly read the store.

`Searcher.prefetch_query` starts the model and returns; `query_vector` takes its result, so a
query is embedded once however many parts of a turn ask for it. A forget while a query is
being embedded keeps its vector out of the cache.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from ctxbase import ContextBase
from ctxbase.retrieve.embed import HashingEmbedder
from ctxbase.retrieve.embed.base import FloatMatrix, FloatVector
from ctxbase.store.base import Store

PREFETCH_THREAD = "ctxbase-query-embedding"


class GatedEmbedder:
    """The hash embedder; query embeddings wait for `gate` and note the thread they ran on."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=64)
        self.name = self.inner.name
        self.dim = self.inner.dim
        self.gate = threading.Event()
        self.gate.set()
        self.calls: list[tuple[str, str]] = []

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> FloatVector:
        self.calls.append((text, threading.current_thread().name))
        assert self.gate.wait(10), "the test never opened the gate"
        return self.inner.embed_query(text)

    def started(self, text: str) -> bool:
        """Wait (at most 10 s) until an embedding of `text` has begun."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if any(t == text for t, _ in self.calls):
                return True
            time.sleep(0.005)
        return False


@pytest.fixture
def gated(store: Store, project_id: str) -> Iterator[tuple[ContextBase, GatedEmbedder]]:
    embedder = GatedEmbedder()
    cb = ContextBase(store, project=project_id, embedder=embedder, background_embedding=False)
    cb.record("user_message", session_id="s1", text="订单查询要加 Redis 缓存", agent_id="alice")
    cb.record("user_message", session_id="s1", text="the cache hit rate is 12%", agent_id="bob")
    cb.wait_for_embeddings()
    try:
        yield cb, embedder
    finally:
        embedder.gate.set()
        cb.close()


def test_prefetch_returns_at_once_and_the_query_is_embedded_once(
    gated: tuple[ContextBase, GatedEmbedder],
) -> None:
    cb, embedder = gated
    embedder.gate.clear()
    cb.searcher.prefetch_query("cache hit rate")  # returns while the model is held
    assert embedder.started("cache hit rate")
    cb.searcher.prefetch_query("cache hit rate")  # already under way: not started again
    embedder.gate.set()
    vector = cb.searcher.query_vector("cache hit rate")
    np.testing.assert_array_equal(vector, embedder.inner.embed_query("cache hit rate"))
    assert embedder.calls == [("cache hit rate", PREFETCH_THREAD)]
    cb.searcher.query_vector("cache hit rate")  # cached now
    assert len(embedder.calls) == 1


def test_search_and_assembly_embed_the_query_off_the_calling_thread(
    gated: tuple[ContextBase, GatedEmbedder],
) -> None:
    cb, embedder = gated
    found = cb.search("what is the cache hit rate", preset="hybrid")
    assert any(c.semantic_rank is not None for c in found.considered)
    assert embedder.calls == [("what is the cache hit rate", PREFETCH_THREAD)]

    cb.assemble_context(agent_role="coder", user_intent="订单查询的缓存怎么做")
    asked = [call for call in embedder.calls if call[0] == "订单查询的缓存怎么做"]
    assert asked == [("订单查询的缓存怎么做", PREFETCH_THREAD)]


def test_a_forget_during_the_embedding_keeps_the_vector_out_of_the_cache(
    gated: tuple[ContextBase, GatedEmbedder], project_id: str
) -> None:
    cb, embedder = gated
    embedder.gate.clear()
    cb.searcher.prefetch_query("alice's secret plan")
    assert embedder.started("alice's secret plan")
    cb.searcher.forget_cached(project_id)
    embedder.gate.set()
    cb.searcher.query_vector("alice's secret plan")  # the waiting caller still gets it
    cb.searcher.query_vector("alice's secret plan")
    assert len(embedder.calls) == 2  # ... but it was not kept: embedded again


def test_a_failed_prefetch_leaves_the_search_answering_by_keyword(
    gated: tuple[ContextBase, GatedEmbedder],
) -> None:
    cb, embedder = gated

    def broken(text: str) -> FloatVector:
        raise RuntimeError("model crashed")

    embedder.embed_query = broken  # type: ignore[method-assign]
    found = cb.search("cache hit rate", preset="hybrid")
    assert found.embedder_error is not None and "model crashed" in found.embedder_error
    assert [c.item.text for c in found.results][:1] == ["the cache hit rate is 12%"]
