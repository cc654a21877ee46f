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
    "checked_rows",
    "checked_vector",
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
    """Embed many queries, batched when the embedder offers `embed_queries` itself; the
    result is checked (`checked_rows`)."""
    batched = getattr(embedder, "embed_queries", None)
    if callable(batched):
        return checked_rows(batched(texts), len(texts), embedder.dim)
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    rows = [checked_vector(embedder.embed_query(text), embedder.dim) for text in texts]
    return np.stack(rows)


def checked_rows(rows: object, count: int, dim: int) -> FloatMatrix:
    """What an embedder returned for `count` texts as a float32 (count, dim) matrix (a list
    of lists or any array-like is converted); EmbeddingError naming what is wrong when it
    has another shape or holds NaN or infinite values. A custom embedder's bad batch must
    not be stored as if embedded: such a vector is never found by meaning again."""
    try:
        matrix = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(
            f"the embedder returned a {type(rows).__name__} that is not a matrix of numbers ({exc})"
        ) from exc
    if matrix.shape != (count, dim):
        raise EmbeddingError(
            f"the embedder returned shape {matrix.shape} for {count} texts; expected "
            f"({count}, {dim}), its dim being {dim}"
        )
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        bad = int(count - finite.sum())
        raise EmbeddingError(
            f"the embedder returned {bad} of {count} vectors with NaN or infinite values"
        )
    return matrix


def checked_vector(vector: object, dim: int) -> FloatVector:
    """One query's vector, checked as `checked_rows` checks a batch (shape (dim,); a single
    row (1, dim) is taken too)."""
    try:
        row = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(
            f"the embedder returned a {type(vector).__name__} that is not a vector of numbers "
            f"({exc})"
        ) from exc
    if row.shape == (1, dim):
        row = row[0]
    if row.shape != (dim,):
        raise EmbeddingError(
            f"the embedder returned shape {row.shape} for a query; expected ({dim},), its "
            f"dim being {dim}"
        )
    if not np.isfinite(row).all():
        raise EmbeddingError("the embedder returned a query vector with NaN or infinite values")
    return row


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
