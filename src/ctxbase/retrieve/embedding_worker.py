"""Embedding off the write path: a background thread embeds items that have no vector yet.

Capture never waits on the model; keyword search works before vectors are ready. Items whose
vector was made by another model are re-embedded, so changing the model re-embeds everything.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..store.base import Store
from .embed.base import Embedder

__all__ = ["EmbeddingWorker"]


class EmbeddingWorker:
    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        batch_size: int = 64,
        idle_poll_s: float = 2.0,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.batch_size = batch_size
        self.idle_poll_s = idle_poll_s
        self._on_error = on_error
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._lock = threading.Lock()
        self.embedded = 0
        self.errors = 0
        self.last_error: str | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ctxbase-embedder", daemon=True
                )
                self._thread.start()

    def notify(self) -> None:
        self._idle.clear()
        self._wake.set()

    def backlog(self) -> int:
        """Items still waiting for a vector (capped at a few thousand for speed)."""
        return len(self.store.pending_embeddings(self.embedder.name, 5000))

    def run_once(self) -> int:
        """Embed one batch in the calling thread; returns how many items were embedded."""
        pending = self.store.pending_embeddings(self.embedder.name, self.batch_size)
        if not pending:
            return 0
        vectors = self.embedder.embed_documents([text for _, _, text in pending])
        rows = [(p, i, vectors[n]) for n, (p, i, _) in enumerate(pending)]
        written = self.store.put_vectors(self.embedder.name, rows)
        self.embedded += written
        return len(pending)

    def drain(self, progress: Callable[[int], None] | None = None) -> int:
        """Embed everything pending in the calling thread (for batch jobs and tests)."""
        total = 0
        while True:
            n = self.run_once()
            if n == 0:
                return total
            total += n
            if progress:
                progress(total)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until the background thread finds nothing left to embed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.notify()
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._idle.wait(remaining):
                return False
            if not self.store.pending_embeddings(self.embedder.name, 1):
                return True

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                n = self.run_once()
            except Exception as exc:  # keep running: the next poll retries
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                if self._on_error:
                    self._on_error(exc)
                time.sleep(1.0)
                continue
            if n == 0:
                self._idle.set()
                self._wake.wait(self.idle_poll_s)
                self._wake.clear()
