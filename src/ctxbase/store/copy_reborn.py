"""Sessions (or a whole project) a destination forgot and holds again: their two lives in a
copy (migrate-data).

A session id written to again after its forget keeps its tombstone, with the time of that
forget (`Store.forgotten_times`). A copy from a backup taken before it (copy_filter) tells
the session's rows apart by that time: its tasks, facts (scopes 'session' and 'message',
every version) and traces written before the forget belong to the life that was forgotten
and are left out; those written since (a backup newer than the forget) are copied. Its
events need no time: each one forgotten left a tombstone of its own.

The destination holds rows of the new life the source cannot have (what was written there
since the forget); `Lives.note` counts the rows of the sessions' new lives, on both sides,
so the copy can count those the destination holds beyond the source's as its own
(`TableCopy.own`) and the row-count check still holds. A row belongs to a session's life by
its session (sessions, tasks, events, items, traces), its scope (state: the session's
scopes, its tasks', records keyed by its events), or through its events (relations from or
to one, entities anchored from one, the vectors of its items).

A project forgotten whole and written to again is the same, for every row: its project row,
tasks, facts and traces written before that forget are its forgotten life (its sessions,
events and entities each left a tombstone), and every row the destination holds of the
project belongs to its new life.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .forget_steps import KEYED_BY_ID_SCOPES

__all__ = ["Lives"]

Row = Mapping[str, Any]
_SESSION_SCOPES = ("session", "message")


def _trace_session(row: Row) -> Any:
    trace = row.get("trace")
    return row.get("session_id") or (
        trace.get("session_id") if isinstance(trace, Mapping) else None
    )


class Lives:
    """The sessions of one project forgotten in the destination and held there again:
    session id -> when it was last forgotten; `project`: when the whole project was last
    forgotten, when the destination holds it again. `counts[table]`: the rows noted that
    belong to their new lives."""

    def __init__(self, forgot: Mapping[str, float], project: float | None = None) -> None:
        self.forgot = dict(forgot)
        self.project = project
        self.counts: Counter[str] = Counter()
        self._tasks: set[str] = set()
        self._events: set[str] = set()
        self._items: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.forgot) or self.project is not None

    def before(self, session_id: Any, at: Any) -> bool:
        """A row of `session_id` (None: of no session) written at `at` belongs to the life
        it was forgotten in (the session's, or the whole project's)."""
        if not isinstance(at, (int, float)):
            return False
        if self.project is not None and at < self.project:
            return True
        forgot = self.forgot.get(session_id) if isinstance(session_id, str) else None
        return forgot is not None and at < forgot

    def old_fact(self, row: Row, at: Any) -> bool:
        """A state record (or version) from a forgotten life: of such a session's scopes,
        or any of a project forgotten whole."""
        session = row["scope_id"] if row["scope"] in _SESSION_SCOPES else None
        return self.before(session, at)

    def note(self, table: str, rows: Iterable[Row]) -> None:
        """Count the rows of `table` of the new lives (tables in schema.TABLES order, so
        the events and items their children name are known)."""
        if self:
            self.counts[table] += sum(1 for r in rows if self._member(table, r))

    def _member(self, table: str, r: Row) -> bool:
        if self.project is not None:  # every row of the project is of its new life
            return table != "tombstones"
        if table in ("sessions", "tasks", "events"):
            if r["session_id"] not in self.forgot:
                return False
            if table == "tasks":
                self._tasks.add(r["task_id"])
            elif table == "events":
                self._events.add(r["event_id"])
            return True
        if table == "items":
            if r.get("session_id") in self.forgot or r["owner_id"] in self._events:
                self._items.add(r["item_id"])
                return True
            return False
        if table == "item_vectors":
            return r["item_id"] in self._items
        if table == "relations":
            return r["from_id"] in self._events or r["to_id"] in self._events
        if table == "entities":
            props = r.get("properties")
            return isinstance(props, Mapping) and props.get("event_id") in self._events
        if table in ("state", "state_history"):
            scope, scope_id = r["scope"], r["scope_id"]
            return (
                (scope in _SESSION_SCOPES and scope_id in self.forgot)
                or (scope == "task" and scope_id in self._tasks)
                or (scope in KEYED_BY_ID_SCOPES and r["key"] in self._events)
            )
        if table == "traces":
            return _trace_session(r) in self.forgot
        return False  # projects, tombstones
