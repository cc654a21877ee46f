"""The session side of capturing a message list: what the list is aligned against.

capture.alignment decides, given the session's last message events, which messages of a list
were sent before. This module reads them: the stored ones (hidden ones included: a hidden
message was still sent) and the ones still queued on the capture bus, which count as sent
too, so a list re-sent before the previous one is written adds nothing. It also recognises
two cases the plain alignment cannot:

- a retry of a keyed call (`idempotency_key`): the events a keyed call adds carry the key
  in `metadata["capture_call"]`; a call with a key found among the session's last messages
  is aligned against the messages up to there and must add nothing: a list that would add
  messages (other messages, or more) reuses the key for another request, which is refused
  as `record` refuses it (`IdempotencyConflict`, field "messages"), nothing written;
  A retry some of whose messages were hard-forgotten since is told by the ids its call gave
  them (aligned against the messages before the call's first): nothing new either;
- a history re-sent after some of its messages were hard-forgotten: the plain alignment
  finds no overlap, but the ids the messages got when first sent are reproducible (each
  follows the one before it from the session's start), and the store knows them or keeps
  their tombstones (`alignment.from_the_start`).

The caller may say what the list is instead (`shape`, validation.MESSAGE_SHAPES): "auto"
is the guess above; "new" takes every message as new (no comparison: a user's exchange said
twice is stored twice; a retry is told only by its idempotency key); "history" takes the
list as starting at the session's first message, compared with the session's messages
from its start: what they hold was sent before, the rest is new, and a list that differs
from them is refused (ConflictError) rather than guessed about.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from .capture.alignment import (
    MESSAGE_TYPES,
    Alignment,
    align_messages,
    event_signature,
    from_the_start,
    planned_signature,
    stored_calls,
)
from .capture.bus import CaptureBus
from .capture.hooks import PlannedEvent
from .errors import ConflictError, ValidationError
from .idempotency import IdempotencyConflict
from .model import Event
from .store.base import Store
from .validation import MessageShape

__all__ = ["CALL_METADATA", "align_list", "call_metadata"]

# The metadata key that carries the idempotency key of the call that added a message.
CALL_METADATA = "capture_call"
# Messages read beyond the list's length: the calls of tool results sent after them
# (those of calls further back are looked up when a result names one: `_earlier_calls`).
_TAIL_MARGIN = 16

log = logging.getLogger(__name__)


def call_metadata(metadata: dict[str, Any], idempotency_key: str | None) -> dict[str, Any]:
    """A new message's metadata: the planned one, with the key of a keyed call."""
    return metadata if idempotency_key is None else {**metadata, CALL_METADATA: idempotency_key}


def _tail(store: Store, bus: CaptureBus, pid: str, sid: str, n: int) -> list[Event]:
    # queued events first: one written meanwhile is then found among the stored
    pending = [e for e in bus.pending(pid, sid) if e.type in MESSAGE_TYPES]
    stored = store.list_events(
        pid, sid, last_n=n + _TAIL_MARGIN, types=MESSAGE_TYPES, include_inactive=True
    )
    seen = {e.id for e in stored}
    queued = {e.id: e for e in pending if e.id not in seen}
    return [*stored, *queued.values()]


def _earlier_calls(
    store: Store, pid: str, sid: str, planned: Sequence[PlannedEvent], tail: Sequence[Event]
) -> dict[str, str]:
    """The invocations of tool results whose call is older than the tail read: however
    many messages came between a call and its result, the result follows its call. Read
    only when a result names a call the tail does not hold (the session's invocations)."""
    wanted = {p.unresolved_call for p in planned if p.unresolved_call is not None}
    if not wanted or wanted.issubset(stored_calls(tail)):
        return {}
    older = store.list_events(pid, sid, types=["tool_invocation"], include_inactive=True)
    return {c: e for c, e in stored_calls(older).items() if c in wanted}


def align_list(
    store: Store,
    bus: CaptureBus,
    pid: str,
    sid: str,
    planned: Sequence[PlannedEvent],
    *,
    messages: int,
    idempotency_key: str | None,
    shape: MessageShape = "auto",
) -> Alignment:
    """Align a planned message list against the session (see the module doc). A guessed
    list of two or more messages taken wholly as sent before (not a keyed retry) is logged
    at INFO: a repeated exchange sent as new messages would be lost silently otherwise."""
    if shape == "history":
        return _history(store, bus, pid, sid, planned, idempotency_key)
    aligned = _recent(
        store, bus, pid, sid, planned, messages, idempotency_key, new_only=shape == "new"
    )
    if shape == "auto" and messages > 1 and not aligned.new and not aligned.retry:
        log.info(
            "capture_messages: the %d messages sent to session %r of project %r equal its "
            "last stored ones and were taken as sent before, nothing added (shape='new' "
            "stores them as new messages)",
            messages,
            sid,
            pid,
        )
    return aligned


def _recent(
    store: Store,
    bus: CaptureBus,
    pid: str,
    sid: str,
    planned: Sequence[PlannedEvent],
    messages: int,
    idempotency_key: str | None,
    *,
    new_only: bool,
) -> Alignment:
    """The list aligned against the session's last messages: guessed, or (`new_only`)
    every message new unless the call is a keyed retry."""
    tail = _tail(store, bus, pid, sid, len(planned))
    earlier = _earlier_calls(store, pid, sid, planned, tail)
    retry, before = False, tail
    if idempotency_key is not None:
        marked = [i for i, e in enumerate(tail) if e.metadata.get(CALL_METADATA) == idempotency_key]
        if marked:
            before = tail[: marked[0]]  # what the call was aligned against
            tail, retry = tail[: marked[-1] + 1], True
    first_system: list[Event] = []
    if planned[0].type == "system" and len(planned) > 1 and not new_only:
        first_system = store.list_events(pid, sid, types=["system"], include_inactive=True)
        if not first_system:
            first_system = [e for e in tail if e.type == "system"]
    aligned = align_messages(
        planned,
        project_id=pid,
        session_id=sid,
        tail=tail,
        first_system=first_system[: len(planned)],
        single=messages == 1 and not retry,
        earlier_calls=earlier,
        known=0 if new_only and not retry else None,  # a retry equals its call's messages
    )
    aligned.retry = retry
    if retry and aligned.new:
        again = _past_forgotten(
            store, bus, pid, sid, planned, before, first_system, messages, new_only
        )
        if again is None:  # the key names another list than this one
            raise IdempotencyConflict(tail[-1].id, "messages", idempotency_key)
        return again
    if aligned.overlap or not tail or len(planned) < 2 or retry or new_only:
        return aligned
    try:
        root = align_messages(planned, project_id=pid, session_id=sid, tail=[])
    except ValidationError:  # a tool result of an earlier list: not a whole history
        return aligned
    present = store.existing_ids(pid, root.ids) | bus.unwritten(root.ids)
    again = from_the_start(root, present, store.forgotten_ids(pid, root.ids), tail)
    return aligned if again is None else again


def _past_forgotten(
    store: Store,
    bus: CaptureBus,
    pid: str,
    sid: str,
    planned: Sequence[PlannedEvent],
    before: Sequence[Event],
    first_system: Sequence[Event],
    messages: int,
    new_only: bool,
) -> Alignment | None:
    """A keyed retry some of whose messages were hard-forgotten since (their gap keeps the
    list from aligning), or None. Aligned as the call was, against the messages before its
    first one, the list gets the ids the call gave; when each is stored, queued or forgotten
    (and one is forgotten), the list is that call's: nothing new, the forgotten stay out."""
    try:
        aligned = align_messages(
            planned,
            project_id=pid,
            session_id=sid,
            tail=before,
            first_system=first_system[: len(planned)],
            single=messages == 1,
            known=0 if new_only else None,
        )
    except ValidationError:
        return None
    ids = [aligned.ids[i] for i, _, _ in aligned.new]
    gone = store.forgotten_ids(pid, ids)
    known = store.existing_ids(pid, ids) | bus.unwritten(ids) | gone
    if not gone or not known.issuperset(ids):
        return None
    return Alignment(ids=aligned.ids, sent=len(planned), overlap=aligned.overlap, retry=True)


def _history(
    store: Store,
    bus: CaptureBus,
    pid: str,
    sid: str,
    planned: Sequence[PlannedEvent],
    idempotency_key: str | None,
) -> Alignment:
    """A list that starts at the session's first message. The session's messages (stored,
    hidden ones included, then queued) must equal the list's first ones: those were sent
    before, the rest is new (a list shorter than the session adds nothing). Hard-forgotten
    messages leave gaps the stored ones cannot show: such a list is told by the ids its
    messages got when first sent (`_past_gaps`). Anything else is a ConflictError naming
    the first message that differs; a keyed call whose key the session holds adds nothing
    or conflicts, as a guessed list's does."""
    pending = [e for e in bus.pending(pid, sid) if e.type in MESSAGE_TYPES]
    stored = store.list_events(pid, sid, types=MESSAGE_TYPES, include_inactive=True)
    seen = {e.id for e in stored}
    session = [*stored, *(e for e in pending if e.id not in seen)]
    n = min(len(session), len(planned))
    differs = next(
        (j for j in range(n) if event_signature(session[j]) != planned_signature(planned[j])),
        None,
    )
    if differs is None:
        aligned = align_messages(planned, project_id=pid, session_id=sid, tail=session[:n], known=n)
    else:
        past = _past_gaps(store, bus, pid, sid, planned, session)
        if past is None:
            raise ConflictError(
                f"shape='history': messages[{planned[differs].message}] differs from the "
                f"message session {sid!r} holds at that place (a {session[differs].type} "
                "event): a history starts at the session's first message (shape='new' "
                "sends only new messages)"
            )
        aligned = past
    key = idempotency_key
    marked = [e.id for e in session if key is not None and e.metadata.get(CALL_METADATA) == key]
    if marked:
        if aligned.new:  # the key names another list than this one
            raise IdempotencyConflict(marked[-1], "messages", idempotency_key)
        aligned.retry = True
    return aligned


def _past_gaps(
    store: Store,
    bus: CaptureBus,
    pid: str,
    sid: str,
    planned: Sequence[PlannedEvent],
    session: Sequence[Event],
) -> Alignment | None:
    """A history some of whose messages were hard-forgotten, or None. Aligned from the
    session's start, the list's first messages get the ids they got when first sent; the
    run of them the store holds, queues or keeps tombstones of was sent before when it
    holds every stored message of the session, or the whole list (a shorter history)."""
    try:
        root = align_messages(planned, project_id=pid, session_id=sid, tail=[])
    except ValidationError:  # a tool result answering no call of the list
        return None
    present = store.existing_ids(pid, root.ids) | bus.unwritten(root.ids)
    known = present | store.forgotten_ids(pid, root.ids)
    n = 0
    while n < len(root.ids) and root.ids[n] in known:
        n += 1
    if n < len(root.ids) and not {e.id for e in session} <= set(root.ids[:n]):
        return None
    return Alignment(ids=root.ids, sent=n, overlap=n, new=[x for x in root.new if x[0] >= n])
