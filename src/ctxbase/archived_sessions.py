"""An archived session is read-only: captures into it are refused (ConflictError, HTTP 409).

Capture must stay fast, so a capture does not read the session's record. The archive is
final, so what is known to be archived stays archived: this process remembers the sessions
it archived or found archived (`ArchivedSessions.known`), and a capture into one of them is
refused at once (`check`). A session archived elsewhere (another process sharing the store)
is found when the events are written: `split` reads the status of each session of a batch
once, keeps the events of live sessions and returns the others. A synchronous write
(`record`, `record_events`, REST `POST /events`) raises ConflictError then; the background
writer counts the refused events in `capture_stats().refused` and names the session in
`last_error`. Forgetting a session (or a project) removes its record, so the session may be
created anew: the memory of it is dropped then.

The same read finds the batch's expired sessions: an expired session is idle, not closed, so
the writer stores their events and then re-activates them (`lifecycle.reactivate`, expired ->
active with cause "capture", in the status log), on every path that captures.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import NamedTuple

from .assemble.lifecycle import ReadOnlyRecord, Status, reactivate
from .errors import ConflictError
from .model import Event, SessionInfo
from .store.base import Store

__all__ = ["ArchivedSessions", "BatchSessions", "archived_error"]

log = logging.getLogger(__name__)


def archived_error(session_id: str) -> ReadOnlyRecord:
    return ReadOnlyRecord(f"session {session_id!r} is archived; it is read-only")


class BatchSessions(NamedTuple):
    """A batch of events split by the status of their sessions."""

    keep: list[Event]  # events of live sessions (expired ones included): to be stored
    refused: list[Event]  # events of archived sessions
    expired: list[SessionInfo]  # the expired sessions among those kept: re-activated


class ArchivedSessions:
    """The sessions this process knows to be archived, per project."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._known: set[tuple[str, str]] = set()

    def known(self, project_id: str, session_id: str) -> bool:
        return (project_id, session_id) in self._known

    def add(self, project_id: str, session_id: str) -> None:
        with self._lock:
            self._known.add((project_id, session_id))

    def check(self, project_id: str, session_id: str) -> None:
        """Raise ConflictError when the session is known to be archived (no store read)."""
        if (project_id, session_id) in self._known:
            raise archived_error(session_id)

    def forget(self, project_id: str) -> None:
        """Drop what is known of the project's sessions (after a forget removed records)."""
        with self._lock:
            self._known = {k for k in self._known if k[0] != project_id}

    def split(self, events: Sequence[Event]) -> BatchSessions:
        """The events of live sessions, those of archived ones, and the expired sessions
        among the live ones (read once per session not known to be archived)."""
        archived: set[tuple[str, str]] = set()
        expired: list[SessionInfo] = []
        for key in dict.fromkeys((e.project_id, e.session_id) for e in events):
            if key in self._known:
                archived.add(key)
                continue
            info = self._store.get_session(*key)
            if info is not None and info.status == Status.ARCHIVED:
                self.add(*key)
                archived.add(key)
            elif info is not None and info.status == Status.EXPIRED:
                expired.append(info)
        if not archived:
            return BatchSessions(list(events), [], expired)
        keep = [e for e in events if (e.project_id, e.session_id) not in archived]
        refused = [e for e in events if (e.project_id, e.session_id) in archived]
        return BatchSessions(keep, refused, expired)

    def reactivate(self, expired: Sequence[SessionInfo], written: Sequence[Event]) -> None:
        """Re-activate the expired sessions that were written to (a retry that stored
        nothing does not). One archived meanwhile by another process stays archived."""
        stored = {(e.project_id, e.session_id) for e in written}
        for info in expired:
            if (info.project_id, info.session_id) not in stored:
                continue
            try:
                reactivate(self._store, info, cause="capture")
            except ConflictError as exc:  # archived (or re-activated) since it was read
                log.debug("session %r not re-activated: %s", info.session_id, exc)
