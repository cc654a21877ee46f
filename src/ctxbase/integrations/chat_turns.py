"""A framework's chat messages written as a session's next events, all or nothing, and the
messages an adapter's memory recorded in a session, read back page by page.

The LangChain history and the LlamaIndex memory wrote one message at a time: a message the
store refused (a reply that was only a newline) left the messages before it written and
those after it lost, and LlamaIndex's `set` had hidden the old conversation already. Here
every message is built (and so validated) before any is written, and the batch is written
at once (`record_events`: all or nothing, embedded or remote). A message with no text to
read (empty, whitespace, tool calls only) is stored with empty data: its framework form in
the metadata brings it back exactly, and no search finds it by its JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..capture.events import DEFAULT_MAX_CONTENT_BYTES, build_event
from ..errors import ValidationError
from ..model import Event, new_event_id
from .recall import SESSION_LIMIT
from .tools import session_events

if TYPE_CHECKING:
    from ..contextbase import ContextBase
    from ..serve.sdk import Client

__all__ = ["ChatTurn", "hide_own", "own_events", "record_turns"]


@dataclass(frozen=True)
class ChatTurn:
    """One message as an event: its type, text (may be blank), whose it is, and the
    metadata that keeps the framework's own form of it."""

    type: str
    text: str
    agent_id: str
    agent_role: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def record_turns(
    cb: ContextBase | Client,
    session_id: str,
    project: str,
    turns: Sequence[ChatTurn],
    *,
    after: str | None = None,
    read_last: bool = True,
) -> list[Event]:
    """Write `turns` as the session's next events, each following the one before; the
    first follows `after`, else (`read_last`) the session's last event. Nothing is written
    when one of them is refused (ValidationError naming `messages[i]`' field)."""
    parent = after
    if parent is None and read_last:
        last = session_events(cb, session_id, 1, project)
        parent = last[-1].id if last else None
    events: list[Event] = []
    for i, turn in enumerate(turns):
        readable = turn.text if turn.text.strip() else None
        try:
            event = build_event(
                project_id=project,
                session_id=session_id,
                type=turn.type,
                text=readable,
                data=None if readable else {},
                agent_id=turn.agent_id,
                agent_role=turn.agent_role,
                parent_event_ids=[parent] if parent else [],
                metadata=turn.metadata,
                event_id=new_event_id(),
                # a remote client's server checks its own limit again
                max_content_bytes=getattr(cb, "max_content_bytes", DEFAULT_MAX_CONTENT_BYTES),
            )
        except ValidationError as error:  # named as the caller gave it: the i-th message
            raise ValidationError(f"messages[{i}].{error.field}", error.message) from None
        events.append(event)
        parent = event.id
    return cb.record_events(events) if events else []


def own_events(
    cb: ContextBase | Client, session_id: str, project: str, own: Callable[[Event], bool]
) -> list[Event]:
    """Those of the session's last SESSION_LIMIT visible events `own` accepts, oldest first."""
    return [e for e in session_events(cb, session_id, SESSION_LIMIT, project) if own(e)]


def hide_own(
    cb: ContextBase | Client, session_id: str, project: str, own: Callable[[Event], bool]
) -> list[str]:
    """Hide the session's events `own` accepts (restorable with `cb.restore`); their ids.
    A read sees the last SESSION_LIMIT visible events, and a hidden event leaves them, so
    reading again reaches further back: it ends when a read finds nothing of its own."""
    hidden: list[str] = []
    while ids := [e.id for e in own_events(cb, session_id, project, own) if e.id not in hidden]:
        cb.set_hidden(ids, True, project=project)
        hidden += ids
    return hidden
