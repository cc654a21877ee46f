"""Any local sentence-transformers model (optional; needs `pip install sentence-transformers`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import FloatMatrix, FloatVector, first_row, import_optional, l2_normalise_rows

__all__ = ["SentenceTransformerEmbedder", "default_prefixes"]


def default_prefixes(model_name: str) -> tuple[str, str]:
    """(query, document) prefixes the model family was trained with; empty if none."""
    lowered = model_name.lower()
    if "e5" in lowered.split("/")[-1]:
        return "query: ", "passage: "
    return "", ""


class SentenceTransformerEmbedder:
    """Loads the model on first use, from the local cache only when offline.

    The model must already be on disk (a path or a cached hub name); nothing is
    fetched if the machine has no network.
    """

    # calls run one at a time on every core: concurrent queries gain from sharing one
    serial_calls = True
    # the background worker embeds this many passages per call, so closing waits for one
    # such call only (the model's cost is per token: slicing costs nothing measurable)
    document_slice = 8

    def __init__(
        self,
        model_name: str,
        device: str = "cpu",
        batch_size: int = 32,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
    ) -> None:
        if not model_name:
            raise ValueError("SentenceTransformerEmbedder needs a model name or path")
        default_query, default_document = default_prefixes(model_name)
        self._model_name = model_name
        self._device = device
        self._batch_size = batch_size
        self._query_prefix = default_query if query_prefix is None else query_prefix
        self._document_prefix = default_document if document_prefix is None else document_prefix
        self._model: Any = None
        self._dim: int | None = None
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"st/{self._model_name}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._loaded_model()
        assert self._dim is not None
        return self._dim

    def _loaded_model(self) -> Any:
        if self._model is None:
            with self._load_lock:
                if self._model is None:
                    module = import_optional(
                        "sentence_transformers",
                        "sentence-transformers",
                        "The sentence-transformers embedder",
                    )
                    model = module.SentenceTransformer(self._model_name, device=self._device)
                    self._dim = int(model.get_sentence_embedding_dimension())
                    self._model = model
        return self._model

    def _encode(self, texts: Sequence[str], prefix: str) -> FloatMatrix:
        model = self._loaded_model()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # torch models are not safe to call from several threads at once.
        with self._call_lock:
            vectors = model.encode(
                [prefix + text for text in texts],
                batch_size=self._batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return l2_normalise_rows(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        return self._encode(texts, self._document_prefix)

    def embed_query(self, text: str) -> FloatVector:
        return first_row(self._encode([text], self._query_prefix))

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return self._encode(texts, self._query_prefix)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model_name={self._model_name!r})"
