"""A server whose embedder endpoint is down answers searches at once (keyword and graph) and
says why; waiting for vectors is a 503 with the cause, not a silent timeout. The SDK sees the
same fields and the same error as the embedded API."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_server import start

import ctxbase
from ctxbase.errors import EmbedderUnavailableError
from ctxbase.retrieve.embed import clear_embedder_cache
from ctxbase.serve.keys import create_key
from ctxbase.serve.server import BackgroundServer
from ctxbase.store import open_store


@pytest.fixture
def down_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BackgroundServer]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connections are refused
    monkeypatch.setenv("CTXBASE_EMBED_BASE_URL", f"http://127.0.0.1:{port}/v1")
    clear_embedder_cache()
    server = start(tmp_path, embedder="openai:down-model")
    try:
        yield server
    finally:
        server.stop()
        clear_embedder_cache()


def test_search_and_wait_with_the_embedder_down(down_server: BackgroundServer, pid: str) -> None:
    store = open_store(down_server.settings.db)
    try:
        key = create_key(store, projects=[pid], role="write", name="t").key
    finally:
        store.close()
    with ctxbase.connect(down_server.url, api_key=key, project=pid) as client:
        client.record("user_message", session_id="s1", text="the Redis cache is cold")
        started = time.monotonic()
        response = client.search("Redis cache")
        assert time.monotonic() - started < 10
        assert [c.item.text for c in response.results] == ["the Redis cache is cold"]
        assert response.embedder_error is not None and "ConnectError" in response.embedder_error
        assert response.pending_vectors == 1
        with pytest.raises(EmbedderUnavailableError, match="ConnectError"):
            client.wait_for_embeddings(5)
        raw = client.search("Redis cache", preset="keyword")
        assert raw.embedder_error is None and raw.pending_vectors == 0
