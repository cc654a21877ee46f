"""The embedding worker serves projects in turn: one project's bulk backlog does not hold
back another project's new messages, and a wait for one project's vectors ends when that
project has them all.

Each backend gets a database of its own (PostgreSQL: a fresh database on the shared
server): the worker embeds every project it finds, and other tests' projects must not be
among them. The embedder is the hash embedder with a fixed pause per call, so a batch
takes a known time and the order of the calls is the order of service.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.embedding_wait import pending_vectors, wait_for_vectors
from ctxbase.retrieve.embed.base import FloatMatrix
from ctxbase.retrieve.embed.hashing import HashingEmbedder
from ctxbase.retrieve.embedding_worker import EmbeddingWorker
from ctxbase.store.base import Store
from ctxbase.store.sqlite import SQLiteStore

BACKENDS = ("sqlite", "postgres")


class _SlowEmbedder(HashingEmbedder):
    """The hash embedder with a fixed pause per call; records each call's texts."""

    def __init__(self, pause_s: float) -> None:
        super().__init__(dim=32)
        self.pause_s = pause_s
        self.calls: list[list[str]] = []
        self.lock = threading.Lock()

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        time.sleep(self.pause_s)
        with self.lock:
            self.calls.append(list(texts))
        return super().embed_documents(texts)

    def served(self) -> list[str]:
        """Which project ("A", "B", "C": the texts' first letter) each call embedded."""
        with self.lock:
            return ["".join(sorted({t[0] for t in call})) for call in self.calls]


@pytest.fixture(params=BACKENDS)
def own_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store on a database of its own."""
    if request.param == "sqlite":
        store: Store = SQLiteStore(str(tmp_path / "fair.db"))
        yield store
        store.close()
        return
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from ctxbase.store.postgres import PostgresStore

    pg_url = request.getfixturevalue("pg_url")
    name = f"fair_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    store = PostgresStore(make_conninfo(**{**conninfo_to_dict(pg_url), "dbname": name}))
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _write(store: Store, project: str, texts: Sequence[str]) -> None:
    """Items without a vector (a base without an embedder makes none)."""
    cb = ContextBase(store, project=project, embedder=None, anchoring=False)
    for text in texts:
        cb.record("user_message", session_id="s1", text=text)
    cb.flush()  # the store stays open: closing the base would close it


def test_a_small_project_is_embedded_before_a_big_backlog_of_another(own_store: Store) -> None:
    store = own_store
    # project A: a bulk backlog of 200 items, 25 batches of 8 at 40 ms each (~1 s)
    _write(store, "proj-a", [f"A chunk {n} of the ingested repository" for n in range(200)])
    embedder = _SlowEmbedder(pause_s=0.04)
    model = embedder.name
    worker = EmbeddingWorker(store, embedder, batch_size=8, idle_poll_s=0.05)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while len(embedder.calls) < 2 and time.monotonic() < deadline:  # A is being served
            time.sleep(0.01)
        assert embedder.served()[:2] == ["A", "A"]
        # project B: a conversation's three new messages, while A's backlog runs
        _write(store, "proj-b", [f"B message {n} about the refund" for n in range(3)])
        worker.notify()
        calls_before_b = len(embedder.calls)
        started = time.monotonic()
        assert wait_for_vectors(store, worker, "proj-b", 30) is True
        waited = time.monotonic() - started
        # B is done while A still waits: B did not queue behind A's backlog
        assert pending_vectors(store, model, "proj-b") == 0
        a_left = pending_vectors(store, model, "proj-a")
        assert a_left > 100, a_left
        served = embedder.served()
        # B's messages went in batches of their own (one or more: they were written one by
        # one), the first after at most the batch of A under way and one more
        b_calls = [n for n, who in enumerate(served) if "B" in who]
        assert b_calls and all(served[n] == "B" for n in b_calls), served
        assert b_calls[0] <= calls_before_b + 1, served
        b_texts = sorted(t for n in b_calls for t in embedder.calls[n])
        assert b_texts == [f"B message {n} about the refund" for n in range(3)]
        # the wait for B ended with B, long before A's backlog (~1 s of batches) is done
        assert waited < 10.0, waited
        # and A's backlog is finished afterwards, every item once
        assert wait_for_vectors(store, worker, "proj-a", 30) is True
        assert pending_vectors(store, model, "proj-a") == 0
        embedded = [t for call in embedder.calls for t in call]
        assert len(embedded) == len(set(embedded)) == 203
    finally:
        worker.stop()


def test_projects_with_a_backlog_are_served_one_batch_each_in_turn(own_store: Store) -> None:
    store = own_store
    _write(store, "proj-a", [f"A item {n}" for n in range(12)])
    _write(store, "proj-b", [f"B item {n}" for n in range(4)])
    _write(store, "proj-c", [f"C item {n}" for n in range(8)])
    embedder = _SlowEmbedder(pause_s=0.0)
    assert store.pending_projects(embedder.name) == ["proj-a", "proj-b", "proj-c"]
    worker = EmbeddingWorker(store, embedder, batch_size=4)
    assert worker.drain() == 24
    assert embedder.served() == ["A", "B", "C", "A", "C", "A"]
    assert store.pending_projects(embedder.name) == []
    # a project whose items were all embedded drops out of the turn; a new write brings it back
    _write(store, "proj-b", ["B late item"])
    assert store.pending_projects(embedder.name) == ["proj-b"]
    assert worker.run_once() == 1
