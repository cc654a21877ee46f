"""Per-turn tool results expire when the next turn begins, on every write path.

A `tool_result` with `metadata["per_turn"]` (seed 003's `expired_after_turn`) serves the
turn it was fetched in. When a later user message of its session is stored, whichever call
stored it (`ContextManager.add_message`, `record`, `capture`, `record_events`, the capture
queue, REST `POST .../events`), the result's message status moves to expired with the cause
`PER_TURN_CAUSE`, as an explicit lifecycle change: it leaves prompts, searches (other
sessions' assemblies included) and reads mark it. The base's writer calls `expire_after_write`
after each stored batch; a batch with no user message costs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..components import ComponentsSource, components_of
from ..model import Event
from ..store.base import MESSAGE_SCOPE
from .lifecycle import IllegalTransition, Status

__all__ = ["PER_TURN_CAUSE", "expire_after_write", "expire_per_turn"]

log = logging.getLogger("ctxbase.assemble")

PER_TURN_CAUSE = "per-turn tool result: the next turn began"

# tool results read per statement while looking for per-turn ones
_PAGE = 500


def expire_per_turn(
    cb: ComponentsSource,
    project: str,
    session_id: str,
    before_seq: int | None = None,
    *,
    after_seq: int | None = None,
) -> list[str]:
    """Expire the session's active per-turn tool results stored before `before_seq` (all
    of them when None) and after `after_seq` (from the first when None); returns the ids
    expired. Reads the tool results of that range a page at a time (the session's
    (project, session, seq) index) and the statuses of the per-turn ones by key."""
    c = components_of(cb)
    results: list[Event] = []
    after = -1 if after_seq is None else after_seq
    while True:
        page = c.store.event_page(
            project,
            session_id,
            after_seq=after,
            before_seq=before_seq,
            limit=_PAGE,
            types=["tool_result"],
        )
        results += [e for e in page if e.metadata.get("per_turn")]
        if len(page) < _PAGE:
            break
        after = page[-1].seq or 0
    if not results:
        return []
    recorded = c.store.get_state_keys(project, MESSAGE_SCOPE, session_id, [e.id for e in results])
    stale = [
        e.id for e in results if (f := recorded.get(e.id)) is None or f.value == Status.ACTIVE.value
    ]
    if not stale:
        return []
    # the state module (and its fact extractors) only when something expires: a capture
    # of a user message loads no more than this
    from .state import expire_message_record

    return expire_message_record(c, session_id, stale, project=project, cause=PER_TURN_CAUSE)


def expire_after_write(cb: ComponentsSource, written: Sequence[Event]) -> None:
    """After a stored batch: each session that got a user message expires the per-turn tool
    results before its newest one. A concurrent writer that expired them first is fine.

    Only the results stored after the session's last user message of an earlier batch can
    still be active (that message's own batch expired everything before it), so the read
    starts there: its cost follows the turn, not the session's length."""
    first: dict[tuple[str, str], int] = {}
    newest: dict[tuple[str, str], int] = {}
    for e in written:
        if e.seq is None:
            continue
        key = (e.project_id, e.session_id)
        first[key] = min(first.get(key, e.seq), e.seq)
        if e.type == "user_message":
            newest[key] = max(newest.get(key, e.seq), e.seq)
    store = components_of(cb).store
    for (project, session_id), seq in newest.items():
        earlier = store.event_page(
            project,
            session_id,
            before_seq=first[(project, session_id)],
            limit=1,
            types=["user_message"],
        )
        after = earlier[-1].seq if earlier else None
        try:
            expire_per_turn(cb, project, session_id, before_seq=seq, after_seq=after)
        except IllegalTransition as exc:  # expired meanwhile by another writer
            log.debug("per-turn results of %r already expired: %s", session_id, exc)
