"""A retry is the same request: an event written under an id already stored must carry the
same content, else it is refused.

An idempotency key (or a caller-assigned event id) names one request. A retry resends it
unchanged and gets the event stored the first time; a key reused for a different request
would otherwise lose that request without a word (the "no" turn after "yes" under the same
key). As with well-known APIs that take an Idempotency-Key, such a write is an error:
`IdempotencyConflict` (a ConflictError, HTTP 409).

"The same request" is the event's content: `REQUEST_FIELDS` (session, type, text, data,
parents and references). The rest may differ on a retry without being a new request: the
time stamp is taken again, and agent, role, task, importance and metadata describe the
writer rather than what was said. A key belongs to its session: the id it gives is derived
from project, session and key, so the same key in another session names another request.

A synchronous write (`record`, `record_events`, REST `POST /events`) checks the whole batch
before writing anything (`batch_conflicts`), so a conflict leaves nothing written; a batch
holding one id twice with different content is refused the same way, the error naming both
positions (`events[i]`) rather than a stored event; the write
itself is checked again afterwards (`written_conflicts`), which also catches a queued capture
(`capture`, `POST /events/queue`): the background writer refuses it, counts it in
`capture_stats().refused` and names the event in `last_error`, as for an archived session.

A message-list call (`capture_messages`) keyed with an idempotency key is checked when the
list is aligned, before anything is written or queued (message_lists): a call whose key
marks messages already sent is a retry, which must add nothing; one that would add
messages is an `IdempotencyConflict` with `field` "messages".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import ConflictError
from .model import Event
from .store.base import Store

__all__ = [
    "REQUEST_FIELDS",
    "IdempotencyConflict",
    "batch_conflicts",
    "request_difference",
    "written_conflicts",
]

REQUEST_FIELDS = ("session_id", "type", "text", "data", "parent_event_ids", "refers_to")


class IdempotencyConflict(ConflictError):
    """An event id (given, or derived from an idempotency key) already names an event with
    different content: `field` is the first of `REQUEST_FIELDS` that differs. `positions`
    (earlier, later): both are events of the batch being written, not a stored one."""

    field: str

    def __init__(
        self,
        event_id: str,
        field: str,
        key: str | None = None,
        *,
        positions: tuple[int, int] | None = None,
    ) -> None:
        self.event_id = event_id
        self.field = field
        self.key = key
        self.positions = positions
        super().__init__(self._message())

    def _message(self) -> str:
        name, field, key = self.event_id, self.field, self.key
        if self.positions is not None:
            # a batch that repeats an id is a mistake in the batch, not a retry of a request
            first, later = self.positions
            what, named = ("id", name) if key is None else ("idempotency key", key)
            return (
                f"events[{later}] has the {what} of events[{first}] ({named!r}) with a"
                f" different {field}: a batch may hold an event twice only unchanged; give"
                f" each event its own {'id' if key is None else 'key'}"
            )
        if key is None:
            what = f"event id {name!r} is already stored with a different {field}"
        elif field == "messages":  # a keyed capture_messages call whose retry adds messages
            what = f"idempotency key {key!r} was already used for a call with other messages"
        else:
            what = f"idempotency key {key!r} was already used for an event with a different {field}"
        return f"{what}: a retry must resend the same request; give a new request a new key"

    def for_key(self, key: str | None) -> IdempotencyConflict:
        """The same conflict, named by the caller's idempotency key (when there is one)."""
        if key is None:
            return self
        return IdempotencyConflict(self.event_id, self.field, key, positions=self.positions)


def request_difference(stored: Event, sent: Event) -> str | None:
    """The first of `REQUEST_FIELDS` in which `sent` is not a retry of `stored`, else None."""
    for name in REQUEST_FIELDS:
        if _canonical(getattr(stored, name)) != _canonical(getattr(sent, name)):
            return name
    return None


def batch_conflicts(store: Store, events: Sequence[Event]) -> IdempotencyConflict | None:
    """The first event of a batch to be written whose id names different content: an event
    stored before, or one earlier in the batch."""
    if not events:
        return None
    known: dict[tuple[str, str], Event] = {}
    for pid in dict.fromkeys(e.project_id for e in events):
        ids = [e.id for e in events if e.project_id == pid]
        for stored in store.get_events(pid, ids, include_inactive=True):
            known[(pid, stored.id)] = stored
    return _first_conflict(events, known)


def written_conflicts(
    store: Store, events: Sequence[Event], written: Iterable[Event]
) -> list[IdempotencyConflict]:
    """The conflicts of a write: the events the store did not insert (their id was taken,
    before or earlier in the batch) whose stored event has different content."""
    inserted = {(e.project_id, e.id) for e in written}
    counts = Counter((e.project_id, e.id) for e in events)
    # an id the batch holds twice was inserted once: each copy is compared with what was
    # stored (two queued captures under one key before a flush), the identical one passes
    skipped = [
        e
        for e in events
        if (e.project_id, e.id) not in inserted or counts[(e.project_id, e.id)] > 1
    ]
    out: list[IdempotencyConflict] = []
    for pid in dict.fromkeys(e.project_id for e in skipped):
        mine = [e for e in skipped if e.project_id == pid]
        stored = {s.id: s for s in store.get_events(pid, [e.id for e in mine], True)}
        for event in mine:
            first = stored.get(event.id)
            field = None if first is None else request_difference(first, event)
            if field is not None:
                out.append(IdempotencyConflict(event.id, field))
    return out


def _first_conflict(
    events: Sequence[Event], known: dict[tuple[str, str], Event]
) -> IdempotencyConflict | None:
    # each id's first event: the stored one (position None), else the batch's first
    seen: dict[tuple[str, str], tuple[int | None, Event]] = {k: (None, e) for k, e in known.items()}
    for i, event in enumerate(events):
        at, first = seen.setdefault((event.project_id, event.id), (i, event))
        field = request_difference(first, event)
        if field is not None:
            return IdempotencyConflict(event.id, field, positions=None if at is None else (at, i))
    return None


def _canonical(value: Any) -> str:
    """A value as stored: JSON with sorted keys, tuples as lists, and NUL characters as
    U+FFFD (PostgreSQL text cannot hold them)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).replace(
        "\\u0000", "\ufffd"
    )
