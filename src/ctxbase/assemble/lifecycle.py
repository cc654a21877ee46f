"""The lifecycle of context objects: created -> active -> suspended / expired -> archived.

Sessions, tasks and messages move through the same five statuses, but not every move makes
sense for every kind: a message is never suspended (it lives and dies with its task), and
nothing comes back from the archive. Every change of status is an explicit call to
`transition`; an implicit change ("nobody used it, so it is suspended now") cannot be replayed
or debugged, so there is no such thing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from ..errors import ConflictError

__all__ = [
    "LEGAL_TRANSITIONS",
    "ContextKind",
    "IllegalTransition",
    "Status",
    "allowed_targets",
    "can_transition",
    "is_terminal",
    "transition",
]


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
# timeout, a retracted message) and only leads to the archive; the archive is final.
LEGAL_TRANSITIONS: Mapping[ContextKind, Mapping[Status, frozenset[Status]]] = {
    ContextKind.SESSION: {
        _S.CREATED: frozenset({_S.ACTIVE, _S.EXPIRED, _S.ARCHIVED}),
        _S.ACTIVE: frozenset({_S.SUSPENDED, _S.EXPIRED, _S.ARCHIVED}),
        _S.SUSPENDED: frozenset({_S.ACTIVE, _S.EXPIRED, _S.ARCHIVED}),
        _S.EXPIRED: frozenset({_S.ARCHIVED}),
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
