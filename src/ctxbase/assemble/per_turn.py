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


def expire_per_turn(
    cb: ComponentsSource, project: str, session_id: str, before_seq: int | None = None
) -> list[str]:
    """Expire the session's active per-turn tool results stored before `before_seq` (all
    of them when None); returns the ids expired."""
    c = components_of(cb)
    results = [
        e
        for e in c.store.list_events(project, session_id, types=["tool_result"])
        if e.metadata.get("per_turn") and (before_seq is None or (e.seq or 0) < before_seq)
    ]
    if not results:
        return []
    recorded = {f.key: f.value for f in c.store.get_state(project, MESSAGE_SCOPE, session_id)}
    stale = [e.id for e in results if recorded.get(e.id, Status.ACTIVE.value) == Status.ACTIVE]
    if not stale:
        return []
    # the state module (and its fact extractors) only when something expires: a capture
    # of a user message loads no more than this
    from .state import expire_message_record

    return expire_message_record(c, session_id, stale, project=project, cause=PER_TURN_CAUSE)


def expire_after_write(cb: ComponentsSource, written: Sequence[Event]) -> None:
    """After a stored batch: each session that got a user message expires the per-turn tool
    results before its newest one. A concurrent writer that expired them first is fine."""
    newest: dict[tuple[str, str], int] = {}
    for e in written:
        if e.type == "user_message" and e.seq is not None:
            key = (e.project_id, e.session_id)
            newest[key] = max(newest.get(key, e.seq), e.seq)
    for (project, session_id), seq in newest.items():
        try:
            expire_per_turn(cb, project, session_id, before_seq=seq)
        except IllegalTransition as exc:  # expired meanwhile by another writer
            log.debug("per-turn results of %r already expired: %s", session_id, exc)
