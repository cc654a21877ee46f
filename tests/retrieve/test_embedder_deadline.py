"""A stuck or misbehaving embedder never hangs a search or an assembly, nor is its output
stored unchecked.

A query embedding not back within its bound (`query_embed_timeout_s`; the first one, which
may start the model, `model_start_timeout_s`) counts as a failing embedder: the search
answers from keyword and graph and says it timed out, an assembly's trace says so, and the
hung calls do not pile up. A batch of the wrong shape or with NaN values is an embedder
failure (kept pending, reported), and a plain list is taken as a vector. The embedders are
small real classes; the bounds are kept short through the base's options.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from ctxbase import ContextBase
from ctxbase.errors import EmbedderUnavailableError, ValidationError
from ctxbase.retrieve import search as search_module
from ctxbase.retrieve.embed.base import FloatMatrix
from ctxbase.retrieve.embed.hashing import HashingEmbedder

TEXTS = ("the gizmo cache is cold", "deploy the widget at noon", "订单查询要加 Redis 缓存")
QUERY_THREAD = "ctxbase-query-embedding"
T = TypeVar("T")


class StuckQueries:
    """Embeds documents (the hash embedder); a query embedding waits until `release` is
    set, as a wedged model or endpoint would."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=32)
        self.name = "stuck-queries"
        self.dim = self.inner.dim
        self.release = threading.Event()
        self.calls: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.calls.append(text)
        self.release.wait(60)
        return [float(x) for x in self.inner.embed_query(text)]  # a plain list, as HTTP gives


@pytest.fixture
def stuck(tmp_path: Path) -> Iterator[tuple[ContextBase, StuckQueries]]:
    embedder = StuckQueries()
    cb = ContextBase(
        str(tmp_path / "stuck.db"),
        project="p",
        embedder=embedder,
        query_embed_timeout_s=2.0,  # long enough that a second wait would show
        model_start_timeout_s=0.6,
    )
    for text in TEXTS:
        cb.record("user_message", session_id="s1", text=text)
    assert cb.wait_for_embeddings(timeout=30)
    try:
        yield cb, embedder
    finally:
        embedder.release.set()
        cb.close()


def timed(call: Callable[[], T]) -> tuple[T, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def test_a_hung_query_embedding_is_a_timed_out_embedder(
    stuck: tuple[ContextBase, StuckQueries],
) -> None:
    cb, _ = stuck
    found, took = timed(lambda: cb.search("gizmo cache"))
    assert 0.5 <= took < 5  # the model-start bound, not forever
    assert found.results[0].item.text == "the gizmo cache is cold"
    error = found.embedder_error
    assert error is not None and "timed out" in error and "0.6 s" in error
    assert found.pending_vectors == 0

    # the same query again: its embedding is still running past its bound, not waited again
    again, took = timed(lambda: cb.search("gizmo cache"))
    assert took < 1.5 and again.embedder_error == error
    # documents still embed: the worker's success clears the failure, and the query that
    # is still running is named as such, not waited for
    cb.record("user_message", session_id="s1", text="the gizmo was restarted")
    assert cb.wait_for_embeddings(timeout=30) and cb.embedder_error is None
    again, took = timed(lambda: cb.search("gizmo cache"))
    assert took < 1.5 and again.embedder_error is not None
    assert "this query's embedding timed out and still runs" in again.embedder_error

    context, took = timed(
        lambda: cb.assemble_context(agent_role="coder", user_intent="widget deploy")
    )
    assert took < 5
    notes = context.trace["notes"]
    assert any("semantic search left out" in n and "timed out" in n for n in notes), notes
    prompt = " ".join(m["content"] for m in context.messages)
    assert "deploy the widget at noon" in prompt  # found by keyword


def test_an_assembly_waits_for_the_model_start_within_its_bound(
    stuck: tuple[ContextBase, StuckQueries],
) -> None:
    cb, _ = stuck
    context, took = timed(
        lambda: cb.assemble_context(agent_role="coder", user_intent="gizmo cache")
    )
    assert 0.5 <= took < 5
    assert 550 <= context.trace["timings_ms"]["model_start"] < 5000
    notes = context.trace["notes"]
    assert any("starts the model) timed out: no vector within 0.6 s" in n for n in notes), notes
    # the model had its start: the next assembly does not wait for it again
    context, took = timed(lambda: cb.assemble_context(agent_role="coder", user_intent="widget"))
    assert took < 1.5 and "model_start" not in context.trace["timings_ms"]


def test_a_late_vector_is_kept_and_the_embedder_used_again(
    stuck: tuple[ContextBase, StuckQueries],
) -> None:
    cb, embedder = stuck
    assert cb.search("gizmo cache").embedder_error is not None
    embedder.release.set()  # the model comes back: the late vector lands in the cache
    deadline = time.monotonic() + 10
    while cb.embedder_error is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    found = cb.search("gizmo cache")
    assert found.embedder_error is None
    assert found.results[0].semantic_rank == 1
    assert embedder.calls == ["gizmo cache"]  # the late call's vector served this search


def test_hung_query_embeddings_stop_at_a_cap(stuck: tuple[ContextBase, StuckQueries]) -> None:
    cb, embedder = stuck
    cb.searcher.health.retry_after_s = 0.0  # type: ignore[union-attr]  # try every search
    cb.searcher.query_timeout_s = 0.2
    cap = search_module.MAX_OVERDUE_QUERIES
    for n in range(cap + 4):
        found, took = timed(lambda n=n: cb.search(f"cache number {n}", preset="semantic"))
        assert took < 5 and found.embedder_error is not None
    assert len(embedder.calls) == cap
    assert "no more are started" in found.embedder_error
    running = [t for t in threading.enumerate() if t.name == QUERY_THREAD]
    assert len(running) == cap


class StuckEverything(StuckQueries):
    """Document batches hang too (a wedged model)."""

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        self.release.wait(60)
        return self.inner.embed_documents(texts)


@pytest.mark.parametrize("stuck_class", [StuckQueries, StuckEverything])
def test_close_returns_with_the_embedder_hung(
    tmp_path: Path, stuck_class: type[StuckQueries]
) -> None:
    embedder = stuck_class()
    cb = ContextBase(
        str(tmp_path / "c.db"),
        embedder=embedder,
        query_embed_timeout_s=0.2,
        model_start_timeout_s=0.2,
    )
    try:
        cb.record("user_message", session_id="s1", text=TEXTS[0])
        assert cb.search("gizmo").embedder_error is not None
        _, took = timed(cb.close)
    finally:
        embedder.release.set()
    # a worker stuck in the model is waited for 10 s (a slice that does finish is written)
    assert took < (15 if stuck_class is StuckEverything else 5)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("query_embed_timeout_s", 0),
        ("model_start_timeout_s", -1.0),
        ("query_embed_timeout_s", "5"),
        ("model_start_timeout_s", float("nan")),
        ("query_embed_timeout_s", True),
    ],
)
def test_a_bound_must_be_a_positive_number(tmp_path: Path, option: str, value: object) -> None:
    with pytest.raises(ValidationError) as err:
        ContextBase(str(tmp_path / "v.db"), embedder="hash", **{option: value})
    assert err.value.field == option


def test_the_bounds_documented_defaults_are_the_searchers() -> None:
    import inspect

    params = inspect.signature(ContextBase).parameters
    assert params["query_embed_timeout_s"].default == search_module.QUERY_TIMEOUT_S
    assert params["model_start_timeout_s"].default == search_module.MODEL_START_TIMEOUT_S


class Returns:
    """Returns what it is given for documents and queries (rows of `width` values)."""

    def __init__(self, value: float, width: int = 8, as_list: bool = False) -> None:
        self.name, self.dim = "returns", 8
        self.value, self.width, self.as_list = value, width, as_list

    def _rows(self, n: int) -> FloatMatrix:
        rows = np.full((n, self.width), self.value, dtype=np.float32)
        return rows / np.float32(math.sqrt(self.width)) if math.isfinite(self.value) else rows

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        rows = self._rows(len(texts))
        return rows.tolist() if self.as_list else rows  # type: ignore[return-value]

    def embed_query(self, text: str) -> FloatMatrix:
        row = self._rows(1)[0]
        return row.tolist() if self.as_list else row  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("embedder", "problem"),
    [
        (Returns(float("nan")), "3 of 3 vectors with NaN or infinite values"),
        (Returns(1.0, width=5), r"shape \(3, 5\) for 3 texts; expected \(3, 8\)"),
    ],
)
def test_a_bad_batch_is_kept_pending_and_reported(
    tmp_path: Path, embedder: Returns, problem: str
) -> None:
    cb = ContextBase(str(tmp_path / "b.db"), embedder=embedder, background_embedding=False)
    try:
        for text in TEXTS:
            cb.record("user_message", session_id="s1", text=text)
        with pytest.raises(EmbedderUnavailableError, match=problem):
            cb.wait_for_embeddings()
        assert cb.store.pending_embeddings("returns", 10, cb.project) != []
        found = cb.search("gizmo cache")
        assert found.pending_vectors == 3
        assert found.embedder_error is not None and "'returns' unavailable" in found.embedder_error
        assert found.results[0].item.text == "the gizmo cache is cold"
    finally:
        cb.close()


def test_lists_are_taken_as_vectors(tmp_path: Path) -> None:
    cb = ContextBase(
        str(tmp_path / "l.db"), embedder=Returns(1.0, as_list=True), background_embedding=False
    )
    try:
        for text in TEXTS:
            cb.record("user_message", session_id="s1", text=text)
        assert cb.wait_for_embeddings()
        found = cb.search("gizmo cache", preset="semantic")
        assert found.embedder_error is None and len(found.results) == 3
        assert all(c.similarity is not None for c in found.results)
    finally:
        cb.close()


def test_a_nan_query_vector_is_an_embedder_error(tmp_path: Path) -> None:
    class NanQueries(Returns):
        def embed_query(self, text: str) -> FloatMatrix:
            return np.full(8, np.nan, dtype=np.float32)

    cb = ContextBase(str(tmp_path / "q.db"), embedder=NanQueries(1.0), background_embedding=False)
    try:
        cb.record("user_message", session_id="s1", text=TEXTS[0])
        assert cb.wait_for_embeddings()
        found = cb.search("gizmo cache")
        assert found.embedder_error is not None and "NaN" in found.embedder_error
        assert [c.item.text for c in found.results] == [TEXTS[0]]
    finally:
        cb.close()
