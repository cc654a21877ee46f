"""The embedder contract shared by every backend, plus small helpers for implementations."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import httpx

__all__ = [
    "Embedder",
    "EmbeddingError",
    "FloatMatrix",
    "FloatVector",
    "embed_queries",
    "first_row",
    "import_optional",
    "l2_normalise_rows",
    "openai_http_client",
]

# Rows are float32 vectors; the alias documents intent, numpy cannot type the shape.
FloatMatrix = npt.NDArray[np.float32]
FloatVector = npt.NDArray[np.float32]


class EmbeddingError(RuntimeError):
    """An embedding backend failed or returned something unusable.

    `permanent`: trying again cannot help (the endpoint rejected the key, the model or the
    request), so callers stop retrying and report it."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors.

    Documents and queries are separate calls because asymmetric models (e5 and friends)
    encode them differently; symmetric models may use the same encoder for both.
    Cosine similarity between outputs is a plain dot product.
    """

    @property
    def name(self) -> str:
        """Stable model identifier, stored beside vectors so mixed models are detected."""
        ...

    @property
    def dim(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed passages; returns shape (len(texts), dim), rows L2-normalised."""
        ...

    def embed_query(self, text: str) -> FloatVector:
        """Embed one search query; returns shape (dim,), L2-normalised."""
        ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> FloatMatrix:
    """Embed many queries, batched when the embedder offers `embed_queries` itself."""
    batched = getattr(embedder, "embed_queries", None)
    if callable(batched):
        result: FloatMatrix = np.asarray(batched(texts), dtype=np.float32)
        return result
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.stack([embedder.embed_query(text) for text in texts]).astype(np.float32)


def l2_normalise_rows(matrix: npt.ArrayLike) -> FloatMatrix:
    """Return a float32 copy with unit-length rows; all-zero rows stay zero (no direction)."""
    rows = np.array(matrix, dtype=np.float32, copy=True)
    if rows.ndim != 2:
        raise ValueError(f"expected a 2-d array, got shape {rows.shape}")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    np.divide(rows, norms, out=rows, where=norms > 0)
    return rows


def first_row(matrix: FloatMatrix) -> FloatVector:
    """The single row of a (1, dim) result, typed as a vector."""
    row: FloatVector = matrix[0]
    return row


def import_optional(module: str, pip_name: str, purpose: str) -> ModuleType:
    """Import an optional dependency, or fail with the exact install command."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{purpose} needs the '{pip_name}' package: pip install {pip_name}"
        ) from exc


def openai_http_client(
    base_url: str, api_key: str | None, timeout: float, purpose: str
) -> httpx.Client:
    """An httpx client for an OpenAI-compatible endpoint (JSON; a bearer key unless None)."""
    module = import_optional("httpx", "httpx", purpose)
    headers = {"Content-Type": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    client: httpx.Client = module.Client(
        base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout
    )
    return client
