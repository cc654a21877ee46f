"""Micro-batching of query embeddings: concurrent `embed_query` calls share one model call.

A service answers many requests at once, and each needs its query embedded. Embedders
serialise their calls (the model already uses every core), so under load requests queue
for the model one by one. `BatchingEmbedder` turns that queue into batches: the first
caller runs the model at once with what is waiting; callers that arrive while it runs wait,
and when it returns the oldest of them runs the next call for all of them. A lone request
is never delayed (unless `linger_s` asks for a short wait to gather companions), a busy
service makes one call per queue instead of one per request, and a failure reaches every
caller whose query was in the failed call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from .base import Embedder, EmbeddingError, FloatMatrix, FloatVector, embed_queries

__all__ = ["BatchingEmbedder", "gains_from_batching"]


def gains_from_batching(embedder: Embedder) -> bool:
    """Whether concurrent queries gain from sharing calls: embedders whose calls run one at
    a time (a local model that already uses every core) say so with `serial_calls`. Remote
    endpoints answer concurrent requests in parallel and keep their per-query budget."""
    return bool(getattr(embedder, "serial_calls", False))


class _Slot:
    """One waiting query: its result or error, or the signal to lead the next call."""

    __slots__ = ("done", "error", "lead", "text", "vector")

    def __init__(self, text: str) -> None:
        self.text = text
        self.vector: FloatVector | None = None
        self.error: BaseException | None = None
        self.lead = False
        self.done = threading.Event()


class BatchingEmbedder:
    """An embedder whose concurrent query embeddings are made in shared calls.

    `max_batch` caps the queries of one call; `linger_s` (default 0: none) is how long a
    call started from idle waits for more queries to arrive first. Documents pass through
    unchanged (the embedding worker already batches them)."""

    def __init__(self, inner: Embedder, max_batch: int = 64, linger_s: float = 0.0) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be positive, got {max_batch}")
        if linger_s < 0:
            raise ValueError(f"linger_s must not be negative, got {linger_s}")
        self.inner = inner
        self.max_batch = max_batch
        self.linger_s = linger_s
        self.serial_calls = True
        self._lock = threading.Lock()
        self._pending: list[_Slot] = []
        self._busy = False  # a call is running or about to; pending slots wait for it
        # model calls made and queries they carried (what batching saved is their ratio)
        self.calls = 0
        self.queries = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        return self.inner.embed_documents(texts)

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return embed_queries(self.inner, texts)

    def embed_query(self, text: str) -> FloatVector:
        slot = _Slot(text)
        with self._lock:
            self._pending.append(slot)
            lead = not self._busy
            self._busy = True
        if not lead:
            try:
                slot.done.wait()
            except BaseException:  # interrupted: leave the queue, never strand it
                self._abandon(slot)
                raise
            if not slot.lead:
                return self._result(slot)
            slot.done.clear()  # promoted: it leads the next call, its query among them
        elif self.linger_s > 0:
            time.sleep(self.linger_s)
        self._run_batch()
        return self._result(slot)

    def _abandon(self, slot: _Slot) -> None:
        with self._lock:
            if slot in self._pending:
                self._pending.remove(slot)
            if slot.lead:  # promoted but gone: the next waiter leads instead
                if self._pending:
                    self._pending[0].lead = True
                    self._pending[0].done.set()
                else:
                    self._busy = False

    @staticmethod
    def _result(slot: _Slot) -> FloatVector:
        if slot.error is not None:
            raise slot.error
        assert slot.vector is not None
        return slot.vector

    def _run_batch(self) -> None:
        with self._lock:
            batch = self._pending[: self.max_batch]
            del self._pending[: self.max_batch]
        try:
            texts = list(dict.fromkeys(s.text for s in batch))  # a repeated query once
            if len(texts) == 1:  # alone: exactly the call it would have made unbatched
                vectors = np.asarray([self.inner.embed_query(texts[0])], dtype=np.float32)
            else:
                vectors = np.asarray(embed_queries(self.inner, texts), dtype=np.float32)
            if vectors.shape != (len(texts), self.dim):
                raise EmbeddingError(
                    f"{self.name} returned shape {vectors.shape} for {len(texts)} queries"
                )
            by_text = dict(zip(texts, vectors, strict=True))
            for s in batch:
                s.vector = by_text[s.text]
        except BaseException as exc:  # every caller of the call hears of its failure
            for s in batch:
                s.error = exc
        finally:
            self.calls += 1
            self.queries += len(batch)
            with self._lock:
                if self._pending:
                    self._pending[0].lead = True  # the oldest waiter runs the next call
                    self._pending[0].done.set()
                else:
                    self._busy = False
            for s in batch:
                s.done.set()

    def __repr__(self) -> str:
        return f"BatchingEmbedder({self.inner!r}, max_batch={self.max_batch})"
