"""Whether the embedder works: the last failure, shared by the embedding worker and search.

An embedder that cannot work (its package missing, its endpoint refusing the key or not
answering) must not turn into a silent wait: the failure is kept here, searches answer
without their semantic part and say why, and an explicit wait raises it.
"""

from __future__ import annotations

import logging
import threading
import time

from ..errors import EmbedderUnavailableError

__all__ = ["LOGGER_NAME", "EmbedderHealth", "is_permanent"]

LOGGER_NAME = "ctxbase.embedder"
log = logging.getLogger(LOGGER_NAME)


def is_permanent(exc: BaseException) -> bool:
    """Failures that trying again cannot fix: a missing package, a rejected request."""
    return isinstance(exc, ImportError) or bool(getattr(exc, "permanent", False))


def _describe(exc: BaseException) -> str:
    from .embed.base import EmbeddingError  # loaded by any embedder that raised it

    if isinstance(exc, ImportError | EmbeddingError) and str(exc):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class EmbedderHealth:
    """The last failure of one embedder; cleared by the next success."""

    def __init__(self, embedder_name: str, retry_after_s: float = 30.0) -> None:
        self.embedder_name = embedder_name
        # After a failure that may pass (endpoint down), searches skip the query embedding
        # this long instead of paying the embedder's retry budget on every query.
        self.retry_after_s = retry_after_s
        self._lock = threading.Lock()
        self._error: str | None = None
        self._permanent = False
        self._failed_at = 0.0
        self._logged: str | None = None

    @property
    def error(self) -> str | None:
        """The last failure, as one line, or None when the embedder last worked."""
        return self._error

    @property
    def permanent(self) -> bool:
        return self._error is not None and self._permanent

    def record_failure(self, exc: BaseException) -> None:
        message = f"embedder {self.embedder_name!r} unavailable: {_describe(exc)}"
        with self._lock:
            self._error = message
            self._permanent = is_permanent(exc)
            self._failed_at = time.monotonic()
            first = message != self._logged
            self._logged = message
        if first:  # once per distinct failure, not once per retry or query
            log.warning("%s", message)

    def record_success(self) -> None:
        with self._lock:
            self._error = None
            self._permanent = False
            self._logged = None

    def may_try(self) -> bool:
        """Whether a query should call the embedder now."""
        with self._lock:
            if self._error is None:
                return True
            if self._permanent:
                return False
            return time.monotonic() - self._failed_at >= self.retry_after_s

    def unavailable(self) -> EmbedderUnavailableError:
        return EmbedderUnavailableError(self._error or f"embedder {self.embedder_name!r} failed")
