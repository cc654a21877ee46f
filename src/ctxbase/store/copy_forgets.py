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

A repository the source forgot whole (its name's tombstone, kind "repo") that the source
does not hold again: its entities went above (each has its tombstone), and the
destination's records that name it (where it lives, knowledge-base tags covering it, the
pinned view of such a tag) are written as the source's forget left them
(repo_records.py's rule; the pinned view, which a copy cannot pin again, without the
repository and its entities, as copy_filter.py writes it). A repository ingested in the
destination since keeps what it holds there.

A whole-project forget of the source tombstones each of its events, entities, sessions and
repositories, so the same steps cover those. Its facts of no session (the project's, a
user's, a task's) and its traces of no session have no tombstone: the destination's
records last written before that forget, and its traces made before it, which the source
does not hold go too (a record with its history). What the destination wrote after it
stays; when nothing is left, the project's row goes too, as in the source.
"""

from __future__ import annotations

from collections import Counter

from .base import Store
from .repo_records import (
    KB_PIN_KEY,
    KB_PIN_SCOPE,
    KB_TAG_SCOPE,
    REPOSITORY_SCOPE,
    named_repos,
    without_repos,
)
from .schema import TABLES

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
    removed.update(_forget_gone_repos(src, dst, project_id, gone_entities))
    removed.update(_forget_project_records(src, dst, project_id))
    return removed


def _forget_project_records(src: Store, dst: Store, project_id: str) -> Counter[str]:
    """The destination's state records and traces older than the source's whole-project
    forget that the source does not hold (see module doc)."""
    forgot = src.forgotten_times(project_id, [project_id], "project").get(project_id)
    if forgot is None:  # not forgotten whole there (or before schema 9 kept the time)
        return Counter()
    held = {
        (r["scope"], r["scope_id"], r["key"])
        for rows in src.export_rows(project_id, "state")
        for r in rows
    }
    stale: dict[tuple[str, str, str], None] = {
        (r["scope"], r["scope_id"], r["key"]): None
        for rows in dst.export_rows(project_id, "state")
        for r in rows
        if float(r["updated_at"]) <= forgot and (r["scope"], r["scope_id"], r["key"]) not in held
    }
    source_traces = set(_ids(src, project_id, "traces", "context_id"))
    old_traces = [
        str(r["context_id"])
        for rows in dst.export_rows(project_id, "traces")
        for r in rows
        if float(r["created_at"]) <= forgot and r["context_id"] not in source_traces
    ]
    removed: Counter[str] = Counter()
    if stale or old_traces:
        report = dst.forget(project_id, replace_state=stale, trace_ids=sorted(old_traces))
        removed.update(report.removed)
    if _held_by_tombstones_alone(src, dst, project_id):
        # nothing written here since, nothing there: the project row goes as in the source
        removed.update(dst.forget(project_id, whole_project=True).removed)
    return removed


def _held_by_tombstones_alone(src: Store, dst: Store, project_id: str) -> bool:
    """Whether the source holds no project row and the destination nothing of the project
    but its row and tombstones."""
    if _ids(src, project_id, "projects", "project_id"):
        return False
    rest = [t for t in TABLES if t not in ("projects", "tombstones")]
    return all(dst.count_rows(project_id, t) == 0 for t in rest)


def _forget_gone_repos(
    src: Store, dst: Store, project_id: str, gone_entities: set[str]
) -> Counter[str]:
    """The destination's records of the repositories the source forgot (see module doc)."""
    places = {f.key: f.value for f in dst.get_state(project_id, REPOSITORY_SCOPE, "")}
    tags = {f.key: f.value for f in dst.get_state(project_id, KB_TAG_SCOPE, "")}
    names = named_repos(places, tags.values())
    gone = dst.forgotten_ids(project_id, sorted(names), ("repo",)) if names else set()
    if not gone:
        return Counter()
    gone -= set(src.list_repos(project_id))
    gone -= {f.key for f in src.get_state(project_id, REPOSITORY_SCOPE, "")}
    gone -= set(dst.repo_entity_ids(project_id, sorted(gone)))  # ingested here since
    if not gone:
        return Counter()
    pins = dst.get_state(project_id, KB_PIN_SCOPE, "", KB_PIN_KEY)
    records = without_repos(places, tags, pins[0].value if pins else None, gone, gone_entities)
    replace = records.for_copy()
    report = dst.forget(project_id, replace_state=replace, repos=sorted(gone))
    removed = Counter(report.removed)
    # a record written again (one first version) is a rewrite, not a row fewer
    rewritten = sum(value is not None for value in replace.values())
    for table in ("state", "state_history"):
        removed[table] -= rewritten
    return removed
