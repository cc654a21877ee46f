"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from ctxbase.retrieve.embed import (
    EmbeddingError,
    HashingEmbedder,
    OpenAICompatConfig,
    OpenAICompatEmbedder,
)

SERVER_DIM = 32
_reference = HashingEmbedder(dim=SERVER_DIM)


@dataclass
class FakeEndpoint:
    """State shared with the handler: what was received and what to answer next."""

    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    # Status codes to answer, one per request, before answering normally.
    failures: list[int] = field(default_factory=list)
    reverse_order: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler_for(state: FakeEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            payload = json.loads(self.rfile.read(length))
            with state.lock:
                state.requests.append(payload)
                state.headers.append({k.lower(): v for k, v in self.headers.items()})
                failure = state.failures.pop(0) if state.failures else None
            if self.path != "/v1/embeddings":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            if failure is not None:
                self._send(failure, {"error": {"message": f"injected {failure}"}})
                return
            texts = payload["input"]
            # Deterministic, deliberately unnormalised vectors (the client must normalise).
            vectors = 3.0 * _reference.embed_documents(texts)
            data = [
                {"object": "embedding", "index": i, "embedding": vectors[i].tolist()}
                for i in range(len(texts))
            ]
            if state.reverse_order:
                data.reverse()
            self._send(200, {"object": "list", "data": data, "model": payload["model"]})

    return Handler


@pytest.fixture()
def endpoint() -> Iterator[FakeEndpoint]:
    state = FakeEndpoint()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(state))
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    # A short poll interval keeps shutdown (and so each test) fast.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def make_client(endpoint: FakeEndpoint, **overrides: Any) -> OpenAICompatEmbedder:
    settings: dict[str, Any] = {
        "model": "test-embed",
        "base_url": endpoint.base_url,
        "backoff_seconds": 0.0,
        "timeout_seconds": 5.0,
    }
    settings.update(overrides)
    return OpenAICompatEmbedder(OpenAICompatConfig(**settings))


def test_embeds_in_batches_and_keeps_order(endpoint: FakeEndpoint) -> None:
    endpoint.reverse_order = True  # the client must sort by "index", not trust list order
    texts = [f"text number {i}" for i in range(5)]
    with make_client(endpoint, batch_size=2, api_key="sk-local") as client:
        matrix = client.embed_documents(texts)
        assert client.dim == SERVER_DIM
    assert matrix.shape == (5, SERVER_DIM)
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(matrix, _reference.embed_documents(texts), atol=1e-6)
    assert [len(r["input"]) for r in endpoint.requests] == [2, 2, 1]
    assert all(r["model"] == "test-embed" for r in endpoint.requests)
    assert all(h["authorization"] == "Bearer sk-local" for h in endpoint.headers)


def test_query_and_document_prefixes(endpoint: FakeEndpoint) -> None:
    client = make_client(endpoint, query_prefix="query: ", document_prefix="passage: ")
    vector = client.embed_query("budget")
    client.embed_queries(["a", "b"])
    client.embed_documents(["budget"])
    assert [r["input"] for r in endpoint.requests] == [
        ["query: budget"],
        ["query: a", "query: b"],
        ["passage: budget"],
    ]
    assert vector.shape == (SERVER_DIM,)
    np.testing.assert_allclose(vector, _reference.embed_query("query: budget"), atol=1e-6)
    assert "Authorization".lower() not in endpoint.headers[0]


def test_retries_after_one_server_error(endpoint: FakeEndpoint) -> None:
    endpoint.failures = [500]
    client = make_client(endpoint, max_retries=2)
    matrix = client.embed_documents(["retry me"])
    assert len(endpoint.requests) == 2
    assert endpoint.requests[0] == endpoint.requests[1]
    np.testing.assert_allclose(matrix, _reference.embed_documents(["retry me"]), atol=1e-6)


def test_rate_limit_is_retried(endpoint: FakeEndpoint) -> None:
    endpoint.failures = [429, 503]
    client = make_client(endpoint, max_retries=2)
    assert client.embed_documents(["x"]).shape == (1, SERVER_DIM)
    assert len(endpoint.requests) == 3


def test_gives_up_after_max_retries(endpoint: FakeEndpoint) -> None:
    endpoint.failures = [500, 500, 500]
    client = make_client(endpoint, max_retries=1)
    with pytest.raises(EmbeddingError, match=r"after 2 attempt\(s\).*HTTP 500"):
        client.embed_documents(["x"])
    assert len(endpoint.requests) == 2


def test_client_errors_are_not_retried(endpoint: FakeEndpoint) -> None:
    endpoint.failures = [400]
    client = make_client(endpoint, max_retries=3)
    with pytest.raises(EmbeddingError, match=r"rejected.*HTTP 400.*injected 400"):
        client.embed_documents(["x"])
    assert len(endpoint.requests) == 1


def test_wrong_path_is_reported(endpoint: FakeEndpoint) -> None:
    client = make_client(endpoint, base_url=endpoint.base_url.removesuffix("/v1"))
    with pytest.raises(EmbeddingError, match="HTTP 404"):
        client.embed_documents(["x"])


def test_dimension_is_learned_or_checked(endpoint: FakeEndpoint) -> None:
    probing = make_client(endpoint)
    assert probing.dim == SERVER_DIM  # one probe request
    assert len(endpoint.requests) == 1
    mismatched = make_client(endpoint, dim=SERVER_DIM * 2)
    assert mismatched.dim == SERVER_DIM * 2  # configured: no request
    assert len(endpoint.requests) == 1
    with pytest.raises(EmbeddingError, match=f"{SERVER_DIM}-d vectors.*expected {SERVER_DIM * 2}"):
        mismatched.embed_documents(["x"])


def test_dimensions_field_is_sent_on_request(endpoint: FakeEndpoint) -> None:
    client = make_client(endpoint, dim=SERVER_DIM, request_dimensions=True)
    client.embed_documents(["x"])
    assert endpoint.requests[0]["dimensions"] == SERVER_DIM


def test_empty_input_makes_no_request(endpoint: FakeEndpoint) -> None:
    client = make_client(endpoint, dim=SERVER_DIM)
    assert client.embed_documents([]).shape == (0, SERVER_DIM)
    assert endpoint.requests == []


def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAICompatEmbedder(
        OpenAICompatConfig(
            model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_seconds=0
        )
    )
    with pytest.raises(EmbeddingError, match=r"after 2 attempt\(s\).*ConnectError"):
        client.embed_documents(["x"])


def test_concurrent_callers_share_one_client(endpoint: FakeEndpoint) -> None:
    client = make_client(endpoint, dim=SERVER_DIM)
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        results[i] = client.embed_documents([f"thread {i}"])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(6):
        np.testing.assert_allclose(
            results[i], _reference.embed_documents([f"thread {i}"]), atol=1e-6
        )


def test_config_is_frozen_and_validated() -> None:
    config = OpenAICompatConfig(model="m")
    with pytest.raises(ValidationError):
        config.model = "other"  # type: ignore[misc]
    with pytest.raises(ValueError):
        OpenAICompatConfig(model="m", batch_size=0)
    with pytest.raises(ValueError):
        OpenAICompatConfig(model="")
