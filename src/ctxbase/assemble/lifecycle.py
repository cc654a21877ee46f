"""The lifecycle of context objects: created -> active -> suspended / expired -> archived.

Sessions, tasks and messages move through the same five statuses, but not every move makes
sense for every kind: a message is never suspended (it lives and dies with its task), and
nothing comes back from the archive. Every change of status is an explicit call to
`transition`; an implicit change ("nobody used it, so it is suspended now") cannot be replayed
or debugged, so there is no such thing here. The one automatic move, expiry after an idle
time, is an explicit rule too (`expire_idle`), logged with its cause like any other, and so
is its undoing: an expired session is idle, not closed, so a capture into it re-activates it
(`reactivate`, cause "capture"), as `resume_session` does; only the archive closes a session.

`save_session` and `save_task` are the only way session and task records are written: the
library (`ContextBase.create_session`, `upsert_task`, `ContextManager`), the REST routes and
therefore the SDK all go through them. They refuse unknown statuses, illegal moves, and any
write to an archived record (the archive is read-only; an expired record may only be
archived, or for a session re-activated), keep the lifecycle's own metadata (`status_log`,
`current_task_id`, `archive_summary`), and log every status change.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from ..errors import ConflictError, ValidationError
from ..model import SessionInfo, TaskInfo
from ..store.base import Store

__all__ = [
    "LEGAL_TRANSITIONS",
    "LIFECYCLE_METADATA",
    "ContextKind",
    "IllegalTransition",
    "ReadOnlyRecord",
    "Status",
    "allowed_targets",
    "can_transition",
    "check_status",
    "expire_idle",
    "is_terminal",
    "logged",
    "reactivate",
    "save_session",
    "save_task",
    "transition",
]

# Metadata keys the lifecycle writes; callers' metadata never replaces them.
LIFECYCLE_METADATA: tuple[str, ...] = ("status_log", "current_task_id", "archive_summary")
_STATUS_LOG_LIMIT = 50


class Status(StrEnum):
    """Where a context object is in its life. The values are what the store writes."""

    CREATED = "created"
    ACTIVE = "active"
    SUSPENDED = "suspended"
    EXPIRED = "expired"
    ARCHIVED = "archived"


class ContextKind(StrEnum):
    """The kinds of context object that have a lifecycle."""

    SESSION = "session"
    TASK = "task"
    MESSAGE = "message"


_S = Status

# Suspension is how a task switch parks work without losing it; expiry is automatic (idle
# timeout, a retracted message) and leads to the archive, except that a session comes back to
# active when it is used again (a capture, or resume); the archive is final.
LEGAL_TRANSITIONS: Mapping[ContextKind, Mapping[Status, frozenset[Status]]] = {
    ContextKind.SESSION: {
        _S.CREATED: frozenset({_S.ACTIVE, _S.EXPIRED, _S.ARCHIVED}),
        _S.ACTIVE: frozenset({_S.SUSPENDED, _S.EXPIRED, _S.ARCHIVED}),
        _S.SUSPENDED: frozenset({_S.ACTIVE, _S.EXPIRED, _S.ARCHIVED}),
        _S.EXPIRED: frozenset({_S.ACTIVE, _S.ARCHIVED}),
        _S.ARCHIVED: frozenset(),
    },
    ContextKind.TASK: {
        _S.CREATED: frozenset({_S.ACTIVE, _S.SUSPENDED, _S.EXPIRED, _S.ARCHIVED}),
        _S.ACTIVE: frozenset({_S.SUSPENDED, _S.EXPIRED, _S.ARCHIVED}),
        _S.SUSPENDED: frozenset({_S.ACTIVE, _S.EXPIRED, _S.ARCHIVED}),
        _S.EXPIRED: frozenset({_S.ARCHIVED}),
        _S.ARCHIVED: frozenset(),
    },
    ContextKind.MESSAGE: {
        _S.CREATED: frozenset({_S.ACTIVE, _S.EXPIRED, _S.ARCHIVED}),
        _S.ACTIVE: frozenset({_S.EXPIRED, _S.ARCHIVED}),
        _S.SUSPENDED: frozenset(),
        _S.EXPIRED: frozenset({_S.ARCHIVED}),
        _S.ARCHIVED: frozenset(),
    },
}


class IllegalTransition(ConflictError, ValueError):
    """A status change that the lifecycle does not allow; names the kind, from and to."""

    code = "illegal_transition"

    def __init__(self, kind: ContextKind, current: Status, target: Status) -> None:
        self.kind = kind
        self.current = current
        self.target = target
        allowed = sorted(t.value for t in LEGAL_TRANSITIONS[kind][current])
        hint = f"allowed from {current.value}: {', '.join(allowed)}" if allowed else "it is final"
        super().__init__(
            f"illegal {kind.value} transition {current.value} -> {target.value} ({hint})"
        )


def _as_status(value: Status | str, what: str) -> Status:
    try:
        return Status(value)
    except ValueError:
        valid = ", ".join(s.value for s in Status)
        raise ValueError(f"unknown {what} status {value!r}; valid: {valid}") from None


def _as_kind(value: ContextKind | str) -> ContextKind:
    try:
        return ContextKind(value)
    except ValueError:
        valid = ", ".join(k.value for k in ContextKind)
        raise ValueError(f"unknown context kind {value!r}; valid: {valid}") from None


def allowed_targets(current: Status | str, kind: ContextKind | str) -> frozenset[Status]:
    """The statuses an object of `kind` may move to from `current`."""
    return LEGAL_TRANSITIONS[_as_kind(kind)][_as_status(current, "current")]


def can_transition(current: Status | str, target: Status | str, kind: ContextKind | str) -> bool:
    return _as_status(target, "target") in allowed_targets(current, kind)


def is_terminal(status: Status | str, kind: ContextKind | str) -> bool:
    """True when nothing can follow `status` (the archive, for every kind)."""
    return not allowed_targets(status, kind)


def transition(current: Status | str, target: Status | str, kind: ContextKind | str) -> Status:
    """Return `target` if the move is legal, else raise `IllegalTransition`.

    Staying in the same status is not a transition and is refused too: a caller that "moves"
    an active task to active has a bug in its bookkeeping.
    """
    kind_ = _as_kind(kind)
    cur = _as_status(current, "current")
    tgt = _as_status(target, "target")
    if tgt not in LEGAL_TRANSITIONS[kind_][cur]:
        raise IllegalTransition(kind_, cur, tgt)
    return tgt


class ReadOnlyRecord(ConflictError):
    """A write to an archived session or task (or to an expired one, other than archiving it
    or re-activating a session)."""

    code = "conflict"


def check_status(value: object, field: str = "status") -> Status:
    """The status named by `value`; anything else is bad input naming `field`."""
    try:
        return Status(str(value))
    except ValueError:
        valid = ", ".join(s.value for s in Status)
        raise ValidationError(field, f"unknown status {value!r}; valid: {valid}") from None


def logged(
    metadata: Mapping[str, Any], old: str, new: str, cause: str, now: float | None = None
) -> dict[str, Any]:
    """`metadata` with one more status_log entry (when, from, to, why); the last 50 kept."""
    out = dict(metadata)
    entries = list(out.get("status_log", []))[-(_STATUS_LOG_LIMIT - 1) :]
    at = time.time() if now is None else now
    entries.append({"ts": at, "from": old, "to": new, "cause": cause})
    out["status_log"] = entries
    return out


def _guard(kind: ContextKind, name: str, current: Status, target: Status) -> None:
    if current == Status.ARCHIVED:
        raise ReadOnlyRecord(f"{kind.value} {name!r} is archived; it is read-only")
    if current == Status.EXPIRED and target not in LEGAL_TRANSITIONS[kind][current]:
        hint = "it can only be archived"
        if kind == ContextKind.SESSION:
            hint = "a capture or resume re-activates it, archiving closes it"
        raise ReadOnlyRecord(f"{kind.value} {name!r} is expired; {hint}")


def _logged_move(
    old_status: str | None,
    target: Status,
    metadata: Mapping[str, Any],
    kind: ContextKind,
    cause: str,
    at: float,
) -> tuple[Status, dict[str, Any]]:
    """The current status and the metadata with the move logged: a new record logs its
    creation, a changed status its (checked) transition."""
    current = Status.CREATED if old_status is None else check_status(old_status)
    out = dict(metadata)
    if old_status is None:
        out = logged(out, "", Status.CREATED.value, cause, at)
    if target != current:
        transition(current, target, kind)
        out = logged(out, current.value, target.value, cause, at)
    return current, out


def save_session(
    store: Store, info: SessionInfo, *, cause: str, now: float | None = None
) -> SessionInfo:
    """Write a session through the lifecycle (see the module doc); returns what was stored.

    A new session starts as created (a status of active logs created -> active); an
    existing one keeps its created_at.
    """
    at = time.time() if now is None else now
    target = check_status(info.status)
    old = store.get_session(info.project_id, info.session_id)
    current, metadata = _logged_move(
        None if old is None else old.status, target, info.metadata, ContextKind.SESSION, cause, at
    )
    if old is not None:
        _guard(ContextKind.SESSION, info.session_id, current, target)
    stored = info.model_copy(
        update={
            "status": target.value,
            "created_at": info.created_at if old is None else old.created_at,
            "updated_at": at,
            "metadata": metadata,
        }
    )
    store.upsert_session(stored)
    return stored


def save_task(store: Store, task: TaskInfo, *, cause: str, now: float | None = None) -> TaskInfo:
    """Write a task through the lifecycle; a task of an archived (or expired) session takes
    no writes but its own archiving."""
    at = time.time() if now is None else now
    target = check_status(task.status)
    session = store.get_session(task.project_id, task.session_id)
    held = None if session is None else check_status(session.status)
    closed = held in (Status.ARCHIVED, Status.EXPIRED)
    if closed and not (held == Status.EXPIRED and target == Status.ARCHIVED):
        raise ReadOnlyRecord(f"session {task.session_id!r} is {held}; its tasks take no writes")
    old = store.get_task(task.project_id, task.task_id)
    current, metadata = _logged_move(
        None if old is None else old.status, target, task.metadata, ContextKind.TASK, cause, at
    )
    if old is not None:
        _guard(ContextKind.TASK, task.task_id, current, target)
        if old.session_id != task.session_id:
            raise ConflictError(
                f"task {task.task_id!r} belongs to session {old.session_id!r}, "
                f"not {task.session_id!r}"
            )
    stored = task.model_copy(
        update={
            "status": target.value,
            "created_at": task.created_at if old is None else old.created_at,
            "updated_at": at,
            "metadata": metadata,
        }
    )
    store.upsert_task(stored)
    return stored


def expire_idle(
    store: Store,
    info: SessionInfo,
    idle_timeout_s: float | None,
    *,
    now: float | None = None,
    last_activity: float | None = None,
) -> SessionInfo:
    """Expire the session when it has been idle longer than `idle_timeout_s` (None: never).

    Idle time counts from the later of its last change and `last_activity` (its newest
    event). Returns the session as it is now (expired, or unchanged)."""
    if idle_timeout_s is None:
        return info
    status = check_status(info.status)
    if Status.EXPIRED not in LEGAL_TRANSITIONS[ContextKind.SESSION][status]:
        return info
    at = time.time() if now is None else now
    since = max(info.updated_at, last_activity or 0.0)
    idle = at - since
    if idle <= idle_timeout_s:
        return info
    cause = f"idle for {idle:.0f} s (timeout {idle_timeout_s:g} s)"
    return save_session(
        store, info.model_copy(update={"status": Status.EXPIRED.value}), cause=cause, now=at
    )


def reactivate(
    store: Store, info: SessionInfo, *, cause: str = "capture", now: float | None = None
) -> SessionInfo:
    """Move an expired session back to active (a capture into it: the user came back).

    Returns the session as it is now (re-activated, or unchanged when it was not expired)."""
    if check_status(info.status) != Status.EXPIRED:
        return info
    return save_session(
        store, info.model_copy(update={"status": Status.ACTIVE.value}), cause=cause, now=now
    )
