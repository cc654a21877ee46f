"""Building and checking events before they enter the bus.

Everything that can be wrong with an event is found here, in the caller's thread, so that a
bad event gets a clear error naming its field and nothing partial is ever written.

Identity: every capture is a new event with a fresh time-ordered id, whatever its content.
Only a retry of the same capture is merged, by the caller naming it: an `idempotency_key`
(the id is derived from it) or an `event_id` assigned before sending (the remote SDK does).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from ..errors import ValidationError
from ..model import (
    Event,
    check_id,
    event_type_names,
    is_event_type,
    keyed_event_id,
    new_event_id,
)
from ..validation import (
    MAX_TEXT_BYTES,
    check_json,
    check_name,
    check_text,
    constraint_words,
    either,
    is_blank,
)
from .event_fields import event_body, event_time

__all__ = [
    "DEFAULT_MAX_CONTENT_BYTES",
    "MAX_IDEMPOTENCY_KEY_CHARS",
    "RecordReport",
    "build_event",
    "check_event_metadata",
    "check_event_type",
    "check_idempotency_key",
    "check_json",
    "check_text",
    "event_identity",
    "with_ids",
    "with_parents_resolved",
]

# An event's text and data together (validation.MAX_TEXT_BYTES).
DEFAULT_MAX_CONTENT_BYTES = MAX_TEXT_BYTES
MAX_IDEMPOTENCY_KEY_CHARS = 255


# Entity properties carry an expiry (retrieve/expiry.py); an event's metadata does not, so
# this key there is refused rather than stored and ignored.
_NO_EVENT_EXPIRY = (
    "is not honoured on an event (an entity's expires_at is): retract a message with "
    "expire_message, capture a tool result per_turn=True to expire it at the next turn, "
    "or keep temporary information as a fact with a ttl (set_state(..., ttl=seconds))"
)


def check_event_metadata(field: str, metadata: Mapping[str, Any]) -> None:
    """ValidationError for an event metadata key that promises what no reader does."""
    if "expires_at" in metadata:
        raise ValidationError(f"{field}.expires_at", _NO_EVENT_EXPIRY)


@dataclass
class RecordReport:
    """What a synchronous write of events did (`ContextBase.record_events_report`): each
    event as stored (with its seq; the one stored first for a retry of a stored event),
    and `forgotten`, the ids of those not written because the project hard-forgot an event
    of that id: a stale retry of a forgotten event is never written again, and comes back
    as it was sent (seq None)."""

    events: list[Event] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)

    @property
    def stored(self) -> list[Event]:
        """The events the store holds now (those not forgotten)."""
        gone = set(self.forgotten)
        return [e for e in self.events if e.id not in gone]


def event_identity(
    project_id: str, session_id: str, event_id: str | None, idempotency_key: str | None
) -> str:
    """The id a capture is stored under: the caller's `event_id` (a retry resends it), the
    one derived from its `idempotency_key`, else a fresh one."""
    if event_id is not None and idempotency_key is not None:
        raise ValidationError("idempotency_key", "give either event_id or idempotency_key")
    if event_id is not None:
        check_id("event_id", event_id)
        # The prefix keeps caller ids apart from entity ids (they share the search index).
        if not event_id.startswith("ev_"):
            raise ValidationError("event_id", f"event ids start with 'ev_' (got {event_id!r})")
        return event_id
    if idempotency_key is not None:
        return keyed_event_id(project_id, session_id, check_idempotency_key(idempotency_key))
    return new_event_id()


def with_ids(events: Sequence[Event]) -> list[Event]:
    """The events, each with an id: one built without (`Event.id` is "" by default) gets a
    fresh one, as a capture without `event_id` or `idempotency_key` does. Such an event is
    a new event each time it is written; a retry is merged only when it resends the id."""
    return [e if e.id else e.model_copy(update={"id": new_event_id()}) for e in events]


def check_idempotency_key(idempotency_key: str) -> str:
    """A caller's idempotency key: 1-255 characters of valid text, not blank."""
    key = check_text("idempotency_key", idempotency_key)
    if not key or not key.strip() or len(key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise ValidationError(
            "idempotency_key",
            f"must be 1-{MAX_IDEMPOTENCY_KEY_CHARS} characters, not blank",
        )
    return key


def check_event_type(kind: object, field: str = "type") -> str:
    """`kind` when it names a registered event type, else a ValidationError listing them."""
    if not isinstance(kind, str) or not is_event_type(kind):
        raise ValidationError(
            field,
            f"unknown event type {kind!r}; known types: {', '.join(event_type_names())} "
            "(a Python caller can add its own with ctxbase.register_event_type())",
        )
    return kind


def build_event(
    *,
    project_id: str,
    session_id: str,
    type: str | None = None,
    text: str | bytes | None = None,
    data: Any = None,
    agent_id: str = "agent",
    agent_role: str | None = None,
    task_id: str | None = None,
    parent_event_ids: list[str] | tuple[str, ...] | str | None = (),
    refers_to: list[str] | tuple[str, ...] | str | None = (),
    importance: float = 0.5,
    metadata: Mapping[str, Any] | None = None,
    ts: float | str | datetime | None = None,
    event_id: str | None = None,
    idempotency_key: str | None = None,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    allow_blank: bool = False,
    event_type: str | None = None,
    content: Any = None,
    timestamp: float | str | datetime | None = None,
) -> Event:
    """Validate the parts of an event and give it its id (see `event_identity`).

    Seed 001's names are accepted beside the native ones (capture.event_fields):
    `event_type` for `type`, `content` for `text` (a string) or `data` (structured
    content), `timestamp` for `ts`; `ts` and `timestamp` take epoch seconds, an ISO-8601
    string or a datetime (UTC when it has no offset).

    An event needs text or data: blank text (empty or whitespace) without data is refused,
    unless `allow_blank` (a transcript's empty message is still a turn of it). Blank events
    are stored but never indexed, so they match no search."""
    check_id("project_id", project_id)
    check_id("session_id", session_id)
    check_id("agent_id", agent_id)
    if task_id is not None:
        check_id("task_id", task_id)
    kind = either("type", type, "event_type", event_type)
    if kind is None:
        raise ValidationError("type", "is missing (type= or event_type=)")
    check_event_type(kind, "type" if type is not None else "event_type")
    text, data = event_body(text, data, content)
    # Errors name the field as the caller spelt it.
    text_field = "content" if content is not None and text is content else "text"
    data_field = "content" if content is not None and data is content else "data"
    body = check_text(text_field, text)
    # Blank text next to data (a tool call's arguments) is fine.
    if is_blank(body) and data is None and not allow_blank:
        # The same words as the REST service's for any required field left out.
        if body is None:
            raise ValidationError("text", "is missing")
        raise ValidationError(text_field, "is blank (an event needs text or data)")
    # Content gets one byte limit of its own below; data is checked for shape here.
    data_json = None if data is None else check_json(data_field, data, max_bytes=None)
    text_size = len((body or "").encode("utf-8"))
    data_size = len((data_json or "").encode("utf-8"))
    size = text_size + data_size
    if size > max_content_bytes:
        raise ValidationError(
            data_field if data_size > text_size else text_field,
            f"content is {size} bytes, over the limit of {max_content_bytes} bytes",
        )
    parents = _id_list("parent_event_ids", parent_event_ids)
    refs = _id_list("refers_to", refers_to)
    if not isinstance(importance, int | float) or not 0.0 <= float(importance) <= 1.0:
        raise ValidationError("importance", f"must be between 0 and 1 (got {importance!r})")
    if agent_role is not None:
        check_name("agent_role", agent_role)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValidationError(
            "metadata", f"must be a mapping of names to values (got {metadata.__class__.__name__})"
        )
    meta = dict(metadata or {})
    if meta:  # no metadata serialises as "{}": nothing to check
        check_json("metadata", meta)
        check_event_metadata("metadata", meta)
    when = either("ts", event_time("ts", ts), "timestamp", event_time("timestamp", timestamp))
    stamp = time.time() if when is None else when
    eid = event_identity(project_id, session_id, event_id, idempotency_key)
    try:
        return Event(
            id=eid,
            project_id=project_id,
            session_id=session_id,
            task_id=task_id,
            agent_id=agent_id,
            agent_role=agent_role,
            type=kind,
            text=body,
            data=data,
            ts=stamp,
            parent_event_ids=parents,
            refers_to=refs,
            importance=float(importance),
            metadata=meta,
        )
    except PydanticValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "event"
        raise ValidationError(field, constraint_words(err) or err["msg"]) from exc


def _id_list(field: str, ids: list[str] | tuple[str, ...] | str | None) -> list[str]:
    """Ids in order, once each; None is none and one string is one id (not its letters).
    An Event (or anything but a string) where an id goes is refused naming `field[i]`."""
    if ids is None:
        return []
    given = [ids] if isinstance(ids, str) else list(ids)
    for i, value in enumerate(given):
        check_id(f"{field}[{i}]", value)
    return list(dict.fromkeys(given))


def with_parents_resolved(event: Event, into: Mapping[str, str]) -> Event:
    """`event` with each parent or reference merged into an aggregated event replaced by
    that event's id (once: two merged into the same one are one link)."""
    if not into:
        return event

    def resolved(ids: Sequence[str]) -> list[str]:
        return list(dict.fromkeys(into.get(i, i) for i in ids))

    return event.model_copy(
        update={
            "parent_event_ids": resolved(event.parent_event_ids),
            "refers_to": resolved(event.refers_to),
        }
    )
