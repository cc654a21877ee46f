"""What the source forgot since an earlier copy is forgotten in the destination too
(migrate-data run again into a backup it made before).

A copy brings the source's tombstones. Rows the destination received from an earlier copy
and the source has hard-forgotten since are covered by them: left there, a base opening
the destination would show what was forgotten, beside a tombstone saying it was. So, after
the tables, in the copy's transaction, the destination forgets (`Store.forget`) its events
and entities the new tombstones name and the source no longer holds, and a session the
source forgot when every event the destination holds of it goes with it (a session
written to in the destination since keeps its new events and its row; the forgotten ones
still go, each has its own tombstone).

Left as they are: a whole-project forget of the source (the destination's rows of the
project may be its own, written there since) and a repository forgotten whole there
(its items and entities carry tombstones of their own only when events named them).
"""

from __future__ import annotations

from collections import Counter

from .base import Store

__all__ = ["forget_what_the_source_forgot"]


def _ids(store: Store, project_id: str, table: str, column: str) -> list[str]:
    return [str(r[column]) for rows in store.export_rows(project_id, table) for r in rows]


def forget_what_the_source_forgot(src: Store, dst: Store, project_id: str) -> Counter[str]:
    """Forget in `dst` what `src` hard-forgot (see module doc), inside the caller's
    transaction, after `dst` received the source's tombstones. Returns the rows removed
    per table."""
    removed: Counter[str] = Counter()
    events = _ids(dst, project_id, "events", "event_id")
    gone_events = dst.forgotten_ids(project_id, events, ("event",))
    gone_events -= src.existing_ids(project_id, sorted(gone_events))
    entities = _ids(dst, project_id, "entities", "entity_id")
    gone_entities = dst.forgotten_ids(project_id, entities, ("entity",))
    gone_entities -= src.existing_ids(project_id, sorted(gone_entities))
    held_by_source = {s.session_id for s in src.list_sessions(project_id)}
    sessions = [s.session_id for s in dst.list_sessions(project_id)]
    gone_sessions = dst.forgotten_ids(project_id, sessions, ("session",)) - held_by_source
    for session in sorted(gone_sessions):
        left = [
            ev.id
            for ev in dst.list_events(project_id, session, include_inactive=True)
            if ev.id not in gone_events
        ]
        if left:  # written to here since: its new events stay, and so does it
            continue
        report = dst.forget(project_id, session_id=session)
        removed.update(report.removed)
    if gone_events or gone_entities:
        still = dst.existing_ids(project_id, sorted(gone_events | gone_entities))
        if still:
            report = dst.forget(
                project_id,
                event_ids=sorted(still & gone_events),
                entity_ids=sorted(still & gone_entities),
            )
            removed.update(report.removed)
    return removed
