"""Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, llama.cpp)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from .base import (
    EmbeddingError,
    FloatMatrix,
    FloatVector,
    first_row,
    l2_normalise_rows,
    openai_http_client,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAICompatConfig", "OpenAICompatEmbedder"]

# Statuses worth another attempt: rate limiting and server-side failures.
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# A server asking for a longer pause than this is treated as down, not busy.
_MAX_RETRY_AFTER_SECONDS = 30.0


class OpenAICompatConfig(BaseModel):
    """Where and how to call the endpoint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1)
    base_url: str = "https://api.openai.com/v1"
    # SecretStr keeps the key out of reprs and logs.
    api_key: SecretStr | None = None
    batch_size: int = Field(default=64, ge=1, le=2048)
    timeout_seconds: float = Field(default=30.0, gt=0)
    # Whole budget of one query embedding, retries included: a search is waiting on it
    # (documents are embedded in the background and use timeout_seconds per attempt).
    query_timeout_seconds: float = Field(default=10.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    backoff_seconds: float = Field(default=0.5, ge=0)
    # Expected vector length; None means learn it from the first response.
    dim: int | None = Field(default=None, ge=1)
    # Send `dim` as the request's `dimensions` field (only some models support it).
    request_dimensions: bool = False
    # Asymmetric models served remotely still need their prefixes, e.g. "query: ".
    query_prefix: str = ""
    document_prefix: str = ""


class OpenAICompatEmbedder:
    """Batched, retrying client; thread-safe (one shared httpx connection pool)."""

    def __init__(self, config: OpenAICompatConfig) -> None:
        self._config = config
        self._dim = config.dim
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    @property
    def config(self) -> OpenAICompatConfig:
        return self._config

    @property
    def name(self) -> str:
        return f"openai-compat/{self._config.model}"

    @property
    def dim(self) -> int:
        """Vector length; without a configured `dim` this costs one request on first access."""
        if self._dim is None:
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    def _http(self) -> httpx.Client:
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    key = self._config.api_key
                    self._client = openai_http_client(
                        self._config.base_url,
                        None if key is None else key.get_secret_value(),
                        self._config.timeout_seconds,
                        "The OpenAI-compatible embedder",
                    )
        assert self._client is not None
        return self._client

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> OpenAICompatEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _post_with_retries(self, payload: dict[str, Any], budget: float | None = None) -> Any:
        """POST with retries; with a `budget` (seconds), every attempt and pause fits in it."""
        client = self._http()  # raises the install hint if httpx is missing
        import httpx

        attempts = self._config.max_retries + 1
        deadline = None if budget is None else time.monotonic() + budget
        last_problem = "no attempt made"
        made = 0
        for attempt in range(attempts):
            delay = self._config.backoff_seconds * (2**attempt)
            timeout = self._config.timeout_seconds
            if deadline is not None:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout <= 0:
                    break
            made += 1
            try:
                response = client.post("embeddings", json=payload, timeout=timeout)
            except httpx.TransportError as exc:  # connection refused, reset, timeout
                last_problem = f"{type(exc).__name__}: {exc or 'no answer'}"
            else:
                if response.status_code == 200:
                    try:
                        return response.json()
                    except ValueError as exc:
                        raise EmbeddingError(
                            f"embedding endpoint sent invalid JSON: {exc}"
                        ) from exc
                body = response.text[:300]
                last_problem = f"HTTP {response.status_code}: {body}"
                if response.status_code not in _RETRYABLE_STATUS:
                    raise EmbeddingError(
                        f"embedding request rejected ({last_problem})", permanent=True
                    )
                delay = max(delay, _retry_after_seconds(response.headers.get("Retry-After")))
            if attempt + 1 < attempts:
                pause = min(delay, _MAX_RETRY_AFTER_SECONDS)
                if deadline is not None and time.monotonic() + pause >= deadline:
                    break  # no time left for another attempt
                time.sleep(pause)
        within = "" if budget is None else f" within {budget:g} s"
        raise EmbeddingError(
            f"embedding request to {self._config.base_url} failed after {made} "
            f"attempt(s){within} ({last_problem})"
        )

    def _request(self, texts: list[str], budget: float | None = None) -> FloatMatrix:
        payload: dict[str, Any] = {"model": self._config.model, "input": texts}
        if self._config.request_dimensions and self._config.dim is not None:
            payload["dimensions"] = self._config.dim
        body = self._post_with_retries(payload, budget)
        vectors = _parse_embeddings(body, expected_count=len(texts))
        expected_dim = self._dim
        if expected_dim is not None and vectors.shape[1] != expected_dim:
            raise EmbeddingError(
                f"endpoint returned {vectors.shape[1]}-d vectors for model "
                f"{self._config.model!r}, expected {expected_dim}"
            )
        return l2_normalise_rows(vectors)

    def _embed(self, texts: Sequence[str], prefix: str, budget: float | None = None) -> FloatMatrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefixed = [prefix + text for text in texts]
        size = self._config.batch_size
        parts = [
            self._request(prefixed[i : i + size], budget) for i in range(0, len(prefixed), size)
        ]
        matrix = np.concatenate(parts)
        if self._dim is None:
            self._dim = int(matrix.shape[1])
        return matrix

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        return self._embed(texts, self._config.document_prefix)

    def embed_query(self, text: str) -> FloatVector:
        budget = self._config.query_timeout_seconds
        return first_row(self._embed([text], self._config.query_prefix, budget))

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return self._embed(texts, self._config.query_prefix)

    def __repr__(self) -> str:
        config = self._config
        return f"OpenAICompatEmbedder(model={config.model!r}, base_url={config.base_url!r})"


def _retry_after_seconds(header: str | None) -> float:
    if header is None:
        return 0.0
    try:
        return max(0.0, float(header))
    except ValueError:  # an HTTP date: not worth parsing, fall back to backoff
        return 0.0


def _parse_embeddings(body: Any, expected_count: int) -> FloatMatrix:
    """Read `{"data": [{"index": i, "embedding": [...]}, ...]}` in index order."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or len(data) != expected_count:
        got = len(data) if isinstance(data, list) else "no"
        raise EmbeddingError(f"expected {expected_count} embeddings in 'data', got {got}")
    ordered: list[Any] = [None] * expected_count
    for position, item in enumerate(data):
        if not isinstance(item, dict) or "embedding" not in item:
            raise EmbeddingError(f"data[{position}] has no 'embedding'")
        index = item.get("index", position)
        if (
            not isinstance(index, int)
            or not 0 <= index < expected_count
            or ordered[index] is not None
        ):
            raise EmbeddingError(f"data[{position}] has a bad or repeated index {index!r}")
        ordered[index] = item["embedding"]
    try:
        matrix = np.asarray(ordered, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(f"embeddings are not equal-length number lists: {exc}") from exc
    if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.all(np.isfinite(matrix)):
        raise EmbeddingError(f"unusable embedding matrix of shape {matrix.shape}")
    return matrix
