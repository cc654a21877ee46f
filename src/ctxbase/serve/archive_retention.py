"""The server's retention of archived sessions (`serve --archive-retention 30d`): every
`archive_compact_interval_s` (and once at start) compact, in every project, the sessions
archived more than `archive_retention_s` ago (assemble/compaction.py). Off by default."""

from __future__ import annotations

import logging
import threading

from ..background import background_thread
from .logs import LOGGER_NAME
from .runtime import Runtime

__all__ = ["ArchiveCompactor"]

log = logging.getLogger(LOGGER_NAME)


class ArchiveCompactor:
    def __init__(self, rt: Runtime, retention_s: float, interval_s: float) -> None:
        self.rt = rt
        self.retention_s = retention_s
        self.interval_s = interval_s
        self.runs = 0
        self._stop = threading.Event()
        self._thread = background_thread(self._loop, name="ctxbase-archive-retention")

    def start(self) -> ArchiveCompactor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def compact_once(self) -> int:
        """One pass over every project; returns the sessions compacted."""
        compacted = 0
        for pid in self.rt.cb.store.list_projects():
            if self._stop.is_set():
                break
            report = self.rt.cb.compact_archived(self.retention_s, project=pid)
            if report.compacted:
                self.rt.cache.invalidate(pid)  # assembled contexts may quote the turns hidden
                log.info(
                    "archive retention: compacted %d sessions (%d turns) in project %s",
                    len(report.compacted),
                    report.events_hidden,
                    pid,
                )
            compacted += len(report.compacted)
        self.runs += 1
        return compacted

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.compact_once()
            except Exception as exc:  # the next pass tries again
                log.warning("archive retention: compaction failed: %s", exc)
            self._stop.wait(self.interval_s)
