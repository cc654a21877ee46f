"""Vectors of `ContextBase`: the embedder, its background worker and the wait for them.

The worker starts on the first write that needs vectors (never at import or open), serves
the projects in turn, and records the embedder's failures in one `EmbedderHealth` per base
so searches report the same cause the worker met. `wait_for_embeddings` writes the project's
queued captures and waits for capture anchoring first, so a wait right after a capture
covers it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from .capture.bus import CaptureBus, CaptureError
from .errors import ValidationError
from .retrieve.embedder_health import EmbedderHealth
from .validation import check_timeout

if TYPE_CHECKING:
    from .anchor.capture_anchor import AnchorWorker
    from .retrieve.embed.base import Embedder
    from .retrieve.embedding_worker import EmbeddingWorker
    from .store.base import Store

__all__ = ["EmbeddingMethods"]

log = logging.getLogger("ctxbase.contextbase")


class EmbeddingMethods:
    """Mixed into `ContextBase`: the attributes below are set by its `__init__`."""

    store: Store
    _embedder_spec: object
    _embedder: Embedder | None
    _embedding_worker: EmbeddingWorker | None
    _health: EmbedderHealth | None
    _background_embedding: bool
    _worker_lock: threading.Lock
    _bus: CaptureBus
    _anchorer: AnchorWorker | None

    def _pid(self, project: str | None) -> str:
        raise NotImplementedError

    def _addressed_projects(self) -> frozenset[str]:
        raise NotImplementedError

    @property
    def embeds(self) -> bool:
        """Whether this base computes vectors at all (False with embedder=None)."""
        return self._embedder_spec is not None

    def notify_embedder(self) -> None:
        """Wake the background embedder after writing items outside capture/upsert."""
        self._after_write()

    @property
    def embedder(self) -> Embedder | None:
        return self._embedder  # resolved in __init__ (a model itself loads on first use)

    def _embedder_health(self, embedder: Embedder) -> EmbedderHealth:
        # One record per base: a failure the worker meets is reported by searches too.
        if self._health is None:
            self._health = EmbedderHealth(embedder.name)
        return self._health

    @property
    def embedder_error(self) -> str | None:
        """Why the embedder last failed (None when it works or has not run yet)."""
        return None if self._health is None else self._health.error

    @property
    def embedding_worker(self) -> EmbeddingWorker | None:
        with self._worker_lock:
            if self._embedding_worker is None and self.embedder is not None:
                from .retrieve.embedding_worker import EmbeddingWorker

                self._embedding_worker = EmbeddingWorker(
                    self.store,
                    self.embedder,
                    health=self._embedder_health(self.embedder),
                    replacing=self._addressed_projects,
                )
                if self._background_embedding:
                    self._embedding_worker.start()
            return self._embedding_worker

    def _after_write(self) -> None:
        worker = self._embedding_worker
        if worker is not None and self._background_embedding:
            worker.notify()
        elif worker is None and self._background_embedding and self._embedder_spec is not None:
            w = self.embedding_worker  # first write starts the worker lazily
            if w is not None:
                w.notify()

    def wait_for_embeddings(
        self,
        timeout: float | None = None,
        *,
        progress: bool = False,
        warn: bool = True,
        project: str | None = None,
        all_projects: bool = False,
    ) -> bool:
        """Block until every item of the project (this base's, or `project`) has a vector
        (background mode; other projects' backlogs are not waited for; `all_projects=True`:
        every project's, with every project's queued captures), or embed them now;
        the project's captures still queued are written, and what capture anchoring has
        still to write is waited for, first, within the same `timeout` (seconds; None: no
        limit): a wait right after `capture_messages` covers those messages.

        Returns False when `timeout` passes first, and logs a warning saying how many items
        of the project (this base's, or `project`; of every project with `all_projects`)
        still have no vector (they keep being
        embedded in the background; `warn=False` for a caller that polls in short waits and
        says it itself). `progress=True` shows the vectors made out of the backlog on stderr.
        Raises EmbedderUnavailableError, with the cause, when the embedder fails, instead
        of waiting for vectors that never come.
        """
        from .embedding_wait import wait_for_vectors

        timeout = check_timeout("timeout", timeout)
        started = time.monotonic()
        if all_projects and project is not None:
            raise ValidationError("project", "give a project or all_projects=True, not both")
        pid = None if all_projects else self._pid(project)

        def left() -> float | None:
            return None if timeout is None else max(0.0, timeout - (time.monotonic() - started))

        try:
            self._bus.flush(timeout, project=pid)
        except CaptureError:
            if left() != 0.0:
                raise  # not the time running out: the writer failed
            if warn:
                log.warning(
                    "wait_for_embeddings: timed out after %.0f s with captures of %s"
                    " still being written",
                    timeout,
                    "every project" if pid is None else f"project {pid!r}",
                )
            return False
        if self._anchorer is not None and not self._anchorer.wait_idle(left()):
            if warn:
                log.warning(
                    "wait_for_embeddings: timed out after %.0f s with %d event(s) still to anchor",
                    timeout,
                    self._anchorer.stats().pending,
                )
            return False
        worker = self.embedding_worker
        if worker is None:
            return True
        if not self._background_embedding:
            worker.drain()
            return True
        return wait_for_vectors(
            self.store, worker, pid, left(), progress=progress, warn=warn, started=started
        )
