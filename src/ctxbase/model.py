"""The data model: projects hold sessions and tasks; events, entities, relations and state facts.

Every record carries its project id: the storage keys every row by project first, so a
distributed database can shard by project.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import threading
import time
from enum import IntEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import ValidationError

__all__ = [
    "BUILTIN_EVENT_TYPES",
    "EVENT_GRAPH_RELATIONS",
    "ID_RULE",
    "Entity",
    "Event",
    "Priority",
    "Relation",
    "SessionInfo",
    "StateFact",
    "TaskInfo",
    "check_id",
    "event_priority",
    "event_type_names",
    "is_event_type",
    "keyed_event_id",
    "make_entity_id",
    "new_event_id",
    "register_event_type",
    "relation_id_for",
    "stored_relation_id",
]

_ID_RE = re.compile(r"^[A-Za-z0-9_.:@/\-]{1,200}$")


# The rule in words for errors: "letters" alone reads as any script's, but only ASCII
# ones pass, so a Chinese name goes in a title or metadata, not in an id.
ID_RULE = "1-200 ASCII characters: letters A-Z a-z, digits 0-9 and _ . : @ / -"


def check_id(field: str, value: str) -> str:
    """Ids are short printable strings; anything else is refused with the field's name."""
    own_id = getattr(value, "id", None)
    # record() returns an Event, create_session a SessionInfo, switch_task a TaskInfo
    if not isinstance(value, str) and isinstance(own_id, str):
        kind = type(value).__name__
        article = "an" if kind[:1] in "AEIOU" else "a"
        hint = ""
        if kind in ("SessionInfo", "TaskInfo"):
            hint = (
                "; the ContextManager's create_session / switch_task (cb.context_manager()) "
                "return the id itself"
            )
        raise ValidationError(
            field, f"takes an id, not {article} {kind}: pass the {kind}'s id (.id){hint}"
        )
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise ValidationError(field, f"must be {ID_RULE} (got {value!r})")
    return value


def id_arg(field: str, value: Any) -> str:
    """An id argument as given, once it is a string: an Event, SessionInfo or TaskInfo where
    its id goes, or a number, None..., is refused naming the field (`check_id`'s message).
    Its form is not checked here: an id that was never valid is simply not found."""
    return value if isinstance(value, str) else check_id(field, value)  # that raises


class Priority(IntEnum):
    """Capture priority: high events are never dropped, low ones may be under backpressure."""

    LOW = 0
    NORMAL = 1
    HIGH = 2


BUILTIN_EVENT_TYPES: dict[str, Priority] = {
    "user_message": Priority.HIGH,
    "assistant_message": Priority.NORMAL,
    "system": Priority.NORMAL,
    "model_call": Priority.NORMAL,
    "tool_invocation": Priority.NORMAL,
    "tool_result": Priority.HIGH,
    "internal_thought": Priority.LOW,
    # an archived session's raw turns compacted into one (assemble/compaction.py)
    "session_summary": Priority.NORMAL,
}
_event_types: dict[str, Priority] = dict(BUILTIN_EVENT_TYPES)
_event_types_lock = threading.Lock()

# Relations the event graph maintains by itself.
EVENT_GRAPH_RELATIONS = ("NEXT", "CAUSED_BY", "REFERS_TO")


def register_event_type(name: str, priority: Priority | str = Priority.NORMAL) -> None:
    """Allow a new event type (e.g. "plan_step") with its capture priority (a Priority, or
    its name: "low", "normal", "high")."""
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", name):
        raise ValidationError("type", f"event type names are lower_snake_case (got {name!r})")
    try:  # a Priority, its number, or its name ("high")
        level = Priority[priority.upper()] if isinstance(priority, str) else Priority(priority)
    except (KeyError, ValueError, TypeError):
        valid = ", ".join(f"{p.name.lower()} ({p.value})" for p in Priority)
        raise ValidationError("priority", f"must be one of {valid} (got {priority!r})") from None
    with _event_types_lock:
        _event_types[name] = level


def is_event_type(name: str) -> bool:
    return name in _event_types


def event_type_names() -> list[str]:
    """Every event type a capture accepts now: the built-in ones and those registered."""
    with _event_types_lock:
        return sorted(_event_types)


def event_priority(name: str) -> Priority:
    return _event_types.get(name, Priority.NORMAL)


def _digest(parts: list[Any]) -> str:
    raw = json.dumps(parts, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


_id_lock = threading.Lock()
_last_id = 0


def new_event_id() -> str:
    """A fresh id for every capture: 48 bits of milliseconds then 80 random bits (as in
    UUIDv7/ULID), so ids sort by capture time; within one process they strictly increase,
    even inside one millisecond. Identical content captured twice is two events."""
    global _last_id
    value = (time.time_ns() // 1_000_000) << 80 | secrets.randbits(80)
    with _id_lock:
        if value <= _last_id:
            value = _last_id + 1
        _last_id = value
    return f"ev_{value:032x}"


def keyed_event_id(project_id: str, session_id: str, idempotency_key: str) -> str:
    """The id of a capture that carries an idempotency key: a retry with the same key (in the
    same project and session) gets the same id, so the store keeps one event; tombstones
    then hold a hash of this id, never the content."""
    return "ev_" + _digest(["idempotency_key", project_id, session_id, idempotency_key])


def relation_id_for(project_id: str, from_id: str, type: str, to_id: str) -> str:
    return "rel_" + _digest([project_id, from_id, type, to_id])


def stored_relation_id(rel: Relation) -> str:
    """The id a relation is stored under: one per (from, type, to), except the closed copy
    that keeps an earlier assertion of that edge (`<id>@<n>`, written when the edge is
    asserted again with another confidence, source or properties)."""
    rid = relation_id_for(rel.project_id, rel.from_id, rel.type, rel.to_id)
    kept = rel.valid_to is not None and rel.id.startswith(f"{rid}@")
    return rel.id if kept else rid


def make_entity_id(type: str, key: str) -> str:
    """A stable entity id from its type and natural key (path#symbol, table name, title...)."""
    return f"{type}:{_digest([type, key])[:20]}"


def _check_unit_interval(field: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValidationError(field, f"must be between 0 and 1 (got {value})")
    return value


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class Event(_Record):
    """One thing that happened in an agent run: a message, a model call, a tool result..."""

    id: str = ""
    project_id: str
    session_id: str
    task_id: str | None = None
    agent_id: str = "agent"
    agent_role: str | None = None
    type: str
    text: str | None = None
    data: Any = None
    ts: float = Field(default_factory=time.time)
    parent_event_ids: list[str] = Field(default_factory=list)
    refers_to: list[str] = Field(default_factory=list)
    importance: float = 0.5
    metadata: dict[str, Any] = Field(default_factory=dict)
    # False: hidden (soft_delete; restore brings it back). A retracted message stays
    # active here: it is hidden from prompts and searches, and `marks` says so.
    active: bool = True
    seq: int | None = None  # order within the session, assigned by the store
    # What the event reads (last_events, get_event, the causal chain, the timeline) mark
    # it with: "retracted" (or "expired": a per-turn tool result of an earlier turn), out
    # of prompts and searches; "wrong", rated false. Read, never stored.
    marks: list[str] = Field(default_factory=list)
    # Read by the id of an event the capture bus merged into this aggregated one (a burst
    # of low-priority events, each whole in `data["aggregated"]`): that id, whose part of
    # the burst it names. Read, never stored.
    merged_id: str | None = None

    @field_validator("importance")
    @classmethod
    def _importance_range(cls, v: float) -> float:
        return _check_unit_interval("importance", v)

    # Seed 001's names for the fields, to read an event as the article writes it. They are
    # properties, not fields: JSON and model_dump carry the native names only, once.
    @property
    def event_id(self) -> str:
        """`id`."""
        return self.id

    @property
    def event_type(self) -> str:
        """`type`."""
        return self.type

    @property
    def content(self) -> Any:
        """The text, or the data of an event without text (as `content=` is captured)."""
        return self.text if self.text is not None else self.data

    @property
    def timestamp(self) -> float:
        """`ts` (epoch seconds)."""
        return self.ts


class Entity(_Record):
    """A typed, anchored unit worth remembering: a document, a code symbol, a SQL table..."""

    id: str
    project_id: str
    type: str
    name: str
    text: str = ""
    properties: dict[str, Any] = Field(default_factory=dict)
    version: int = 1
    latest: bool = True
    active: bool = True
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)


class Relation(_Record):
    """A typed, directed edge between two nodes (events or entities) with its provenance."""

    id: str = ""
    project_id: str
    from_id: str
    type: str
    to_id: str
    confidence: float = 1.0
    source: str
    created_at: float = Field(default_factory=time.time)
    valid_from: float = Field(default_factory=time.time)
    valid_to: float | None = None
    properties: dict[str, Any] = Field(default_factory=dict)

    @field_validator("confidence")
    @classmethod
    def _confidence_range(cls, v: float) -> float:
        return _check_unit_interval("confidence", v)

    @field_validator("source")
    @classmethod
    def _source_present(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValidationError("source", 'is required: "human", a model name, or "auto:<rule>"')
        return v

    @field_validator("type")
    @classmethod
    def _type_form(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Z][A-Z0-9_]{0,63}", v or ""):
            raise ValidationError("type", f"relation types are UPPER_SNAKE_CASE (got {v!r})")
        return v


class SessionInfo(_Record):
    project_id: str
    session_id: str
    status: str = "active"
    title: str | None = None
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # how many of its events are hidden (forget --soft): read by list_sessions and
    # get_session (a session hidden whole keeps its status), 0 from the store itself
    hidden_events: int = 0

    @property
    def id(self) -> str:
        """The session's id (`session_id`), as events and entities have theirs."""
        return self.session_id


class TaskInfo(_Record):
    project_id: str
    task_id: str
    session_id: str
    parent_task_id: str | None = None
    title: str = ""
    status: str = "created"
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def id(self) -> str:
        """The task's id (`task_id`)."""
        return self.task_id


class StateFact(_Record):
    """One versioned key -> value fact, scoped to a task, a session or the whole project.

    `ttl` (seconds, None: none): a fact not written again within it is expired, out of
    assembled contexts and of the fact reads that serve prompts, and kept in its history."""

    project_id: str
    scope: str = "task"  # "task" | "session" | "project"
    scope_id: str = ""
    key: str
    value: Any = None
    version: int = 1
    cause: str | None = None
    updated_at: float = Field(default_factory=time.time)
    ttl: float | None = None

    def expired(self, now: float) -> bool:
        """True when the fact has a ttl and went unwritten for that long by `now`."""
        return self.ttl is not None and self.updated_at + self.ttl <= now
