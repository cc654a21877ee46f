"""The server's retention of soft-deleted rows: every `soft_delete_purge_interval_s` (and
once at start) hard forget, in every project, what was soft-deleted more than
`soft_delete_retention_s` ago."""

from __future__ import annotations

import logging
import threading

from ..background import background_thread
from .logs import LOGGER_NAME
from .runtime import Runtime

__all__ = ["RetentionPurger"]

log = logging.getLogger(LOGGER_NAME)


class RetentionPurger:
    def __init__(self, rt: Runtime, retention_s: float, interval_s: float) -> None:
        self.rt = rt
        self.retention_s = retention_s
        self.interval_s = interval_s
        self.runs = 0
        self._stop = threading.Event()
        self._thread = background_thread(self._loop, name="ctxbase-soft-delete-retention")

    def start(self) -> RetentionPurger:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def purge_once(self) -> int:
        """One pass over every project; returns the rows removed."""
        removed = 0
        for pid in self.rt.cb.store.list_projects():
            if self._stop.is_set():
                break
            report = self.rt.cb.forget(soft_deleted_older_than=self.retention_s, project=pid)
            if report.total:
                self.rt.cache.invalidate(pid)
                log.info("retention: forgot %s in project %s", report.removed, pid)
            removed += report.total
        self.runs += 1
        return removed

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.purge_once()
            except Exception as exc:  # the next pass tries again
                log.warning("retention purge of soft-deleted rows failed: %s", exc)
            self._stop.wait(self.interval_s)
