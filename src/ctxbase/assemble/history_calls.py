"""Tool calls in the history layer: each where it was made, said once.

A tool call is stored as a `tool_invocation` caused by the assistant message that made it
(capture.hooks). In the history it reads as capture renders it, `run_sql(sql="SELECT ...")`:

- an assistant message with text and calls ("Let me count them." and a `run_sql` call)
  carries its calls in its own entry, one line each after its text, so the tool result that
  follows has its call before it, at no extra message's cost;
- a message made only of calls already reads as them (its text is the rendered calls): its
  calls add nothing and are held by it;
- a call whose message is not in the history (recorded on its own, or its message older
  than the events read), or that another agent made in answer to it (a coder's `run_sql`
  after the planner's plan), is an assistant entry of its own, where it happened;
- a call whose message is out of the history for its status (retracted, expired) goes
  with it.

A call held by a message is in the prompt through that message: the memory layer leaves it
out ("in history"). Pure: events in, events out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..model import Event
from .repeats import cut_from

__all__ = ["CALL_TYPE", "FoldedHistory", "fold_calls", "same_agent"]

CALL_TYPE = "tool_invocation"
_MESSAGE_TYPE = "assistant_message"


def same_agent(call_agent: str | None, message_agent: str | None) -> bool:
    """Whether a call was made by the agent of the message it follows (either unknown:
    taken as made by it, as capture records a message's calls)."""
    return not call_agent or not message_agent or call_agent == message_agent


@dataclass
class FoldedHistory:
    """The history with calls folded in: `events` in order (a message carrying its calls
    has them in its text), `held` each folded call's message, `gone` each call left out
    with its message (its message's id)."""

    events: list[Event]
    held: dict[str, str] = field(default_factory=dict)
    gone: dict[str, str] = field(default_factory=dict)


def fold_calls(events: Sequence[Event], gone: Mapping[str, str] | None = None) -> FoldedHistory:
    """Fold each call of `events` into its assistant message (see the module doc).

    `gone`: the session's messages left out of the history (id -> why); their calls are
    left out too."""
    gone = gone or {}
    messages = {e.id: e for e in events if e.type == _MESSAGE_TYPE}
    out = FoldedHistory([])
    lines: dict[str, list[str]] = {}
    for e in events:
        if e.type != CALL_TYPE:
            continue
        parent = next(
            (
                p
                for p in e.parent_event_ids
                if (p in messages and same_agent(e.agent_id, messages[p].agent_id)) or p in gone
            ),
            None,
        )
        if parent is None:
            continue
        if parent in gone:
            out.gone[e.id] = parent
            continue
        out.held[e.id] = parent
        text = (e.text or "").strip()
        if text and not cut_from(text, messages[parent].text or ""):
            lines.setdefault(parent, []).append(text)
    for e in events:
        if e.id in out.held or e.id in out.gone:
            continue
        if e.type == CALL_TYPE and not (e.text or "").strip():
            continue  # a call with nothing to show would be an empty block
        calls = lines.get(e.id)
        if calls:
            said = (e.text or "").rstrip()
            text = "\n".join([said, *calls] if said else calls)
            e = e.model_copy(update={"text": text})
        out.events.append(e)
    return out
