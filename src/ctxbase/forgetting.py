"""Hard forget and the retention purge of soft-deleted rows (`ForgetMethods`, mixed into
ContextBase).

The store removes or redacts every stored copy (`Store.forget`); this layer flushes the
capture queue first and then drops what the process holds in memory: cached query
vectors, the project's in-memory vectors, and the term and text-analysis caches.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from .errors import ValidationError
from .retrieve.caches import clear_text_caches
from .store.base import ForgetReport

if TYPE_CHECKING:
    from .retrieve.embedding_worker import EmbeddingWorker
    from .retrieve.search import Searcher
    from .store.base import Store

__all__ = [
    "ForgetMethods",
    "forget",
    "parse_duration",
    "purge_soft_deleted",
    "retention_seconds",
]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str, field: str = "older_than") -> float:
    """Seconds of "90", "90s", "15m", "12h", "30d" or "2w"; ValidationError otherwise."""
    found = _DURATION.match(text)
    if found is None:
        raise ValidationError(field, f"must be a duration such as 3600, 12h or 30d (got {text!r})")
    return float(found.group(1)) * _UNIT_S[found.group(2)]


def retention_seconds(value: float | timedelta | str, field: str = "older_than") -> float:
    """A retention given as seconds, a timedelta or a duration string, checked."""
    if isinstance(value, str):
        return parse_duration(value, field)
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise ValidationError(field, f"must be a duration of at least 0 seconds (got {value!r})")
    return float(seconds)


def forget(
    cb: ForgetMethods,
    *,
    event_ids: Sequence[str] = (),
    entity_ids: Sequence[str] = (),
    session_id: str | None = None,
    whole_project: bool = False,
    soft_deleted_older_than: float | timedelta | str | None = None,
    project: str | None = None,
) -> ForgetReport:
    """See `ContextBase.forget`."""
    if not (event_ids or entity_ids or session_id or whole_project) and (
        soft_deleted_older_than is None
    ):
        raise ValidationError(
            "forget",
            "name event_ids, entity_ids, session_id, soft_deleted_older_than or whole_project=True",
        )
    before = None
    if soft_deleted_older_than is not None:
        before = time.time() - retention_seconds(soft_deleted_older_than)
    pid = cb.resolve_project(project)
    cb.flush()
    report = cb.store.forget(
        pid,
        event_ids=list(event_ids),
        entity_ids=list(entity_ids),
        session_id=session_id,
        whole_project=whole_project,
        soft_deleted_before=before,
    )
    for cache, n in cb._forget_cached(pid).items():
        report.add_cache(cache, n)
    report.add_cache("text_analysis", clear_text_caches())
    return report


def purge_soft_deleted(
    cb: ForgetMethods,
    older_than: float | timedelta | str,
    *,
    project: str | None = None,
    all_projects: bool = False,
) -> ForgetReport:
    """Hard forget what was soft-deleted more than `older_than` ago (seconds, a timedelta
    or "30d"), in one project or in every project; one report for all."""
    retention_seconds(older_than)  # bad input fails before any project is touched
    if not all_projects:
        return forget(cb, soft_deleted_older_than=older_than, project=project)
    total = ForgetReport()
    for pid in cb.store.list_projects():
        one = forget(cb, soft_deleted_older_than=older_than, project=pid)
        for table, n in one.removed.items():
            total.add(table, n)
        for table, n in one.redacted.items():
            total.add_redacted(table, n)
        for cache, n in one.caches.items():
            total.add_cache(cache, n)
    return total


class ForgetMethods:
    """Mixed into `ContextBase`: it supplies `store`, `_searcher`, `_embedding_worker`,
    `flush` and `_pid`."""

    store: Store
    _searcher: Searcher | None
    _embedding_worker: EmbeddingWorker | None

    def _pid(self, project: str | None) -> str:
        raise NotImplementedError

    def resolve_project(self, project: str | None = None) -> str:
        raise NotImplementedError

    def flush(self, timeout: float | None = None) -> None:
        raise NotImplementedError

    def soft_delete(self, ids: Sequence[str], *, project: str | None = None) -> int:
        """Hide events or entities from every read; `restore` brings them back. What was
        anchored from a hidden event (its entities, and mentions no other visible event
        names) is hidden and restored with it, and counted; an entity hidden by its own id
        stays hidden when the event is restored. When they were hidden is recorded:
        `purge_soft_deleted` forgets them after a retention."""
        self.flush()
        return self.store.set_active(self._pid(project), list(ids), False)

    def restore(self, ids: Sequence[str], *, project: str | None = None) -> int:
        return self.store.set_active(self._pid(project), list(ids), True)

    def forget(
        self,
        *,
        event_ids: Sequence[str] = (),
        entity_ids: Sequence[str] = (),
        session_id: str | None = None,
        whole_project: bool = False,
        soft_deleted_older_than: float | timedelta | str | None = None,
        project: str | None = None,
    ) -> ForgetReport:
        """Hard forget events, entities, a session, what was soft-deleted longer ago than
        `soft_deleted_older_than`, or the whole project: every stored copy is removed (rows,
        index entries, vectors, edges, facts, the session's traces) or redacted (other
        sessions' traces), and in-memory caches are dropped; a stale retry of a forgotten
        event is ignored. The report counts each per table and cache."""
        return forget(
            self,
            event_ids=event_ids,
            entity_ids=entity_ids,
            session_id=session_id,
            whole_project=whole_project,
            soft_deleted_older_than=soft_deleted_older_than,
            project=project,
        )

    def purge_soft_deleted(
        self,
        older_than: float | timedelta | str,
        *,
        project: str | None = None,
        all_projects: bool = False,
    ) -> ForgetReport:
        """Hard forget what was soft-deleted more than `older_than` ago (seconds, a
        timedelta or "30d"), in this project, another, or all of them."""
        return purge_soft_deleted(self, older_than, project=project, all_projects=all_projects)

    def _forget_cached(self, project_id: str) -> dict[str, int]:
        # Without a searcher yet nothing is cached (and no embedder needs loading).
        searcher = self._searcher
        dropped = {} if searcher is None else searcher.forget_cached(project_id)
        if self._embedding_worker is not None:
            dropped["code_cards"] = self._embedding_worker.forget_cached()
        return dropped
