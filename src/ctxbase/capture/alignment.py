"""Which messages of a list are new: the list aligned against the session's stored messages.

Callers send message lists in three shapes, and one rule serves them all:

- the whole history each turn (chat hooks): the stored messages are a prefix of the list;
- a window of the last N messages (trimmed histories, often after the system prompt): the
  window starts inside the stored messages;
- only the new message(s): nothing of the list is stored yet, even when a message is
  identical to an earlier one (a user who says "yes" twice said it twice).

The rule: the longest run of the list's first messages that equals the session's last stored
messages (same kinds, texts and data, in order) was sent before; the rest is new. Leading
system messages equal to the session's first stored system messages are the same messages
(a trimmed window keeps the system prompt) when more messages follow them. One exception
keeps repeats: a list of a single message is always new, even when it equals the session's
last message, since it cannot be told from a user who repeats themselves; such a call is
retried safely only with an idempotency key (see message_lists). A caller that says what
the list is (only new messages, or the history from the session's start) is not guessed
for: `align_messages(known=...)` takes the count of messages sent before as given.

Identity: a new message's id is derived from its content, its parents and the id of the
message it follows (`chain_key`), so two writers that align the same list the same way give
it the same ids, and the store keeps it once. A history's ids are therefore those of its
messages aligned from the session's start: a history re-sent after some of its messages
were forgotten is recognised by them (`from_the_start`), and the forgotten ones stay
forgotten (their tombstones ignore a stale write).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ValidationError
from ..model import Event, keyed_event_id
from .hooks import PlannedEvent
from .tool_calls import function_name, sent_text

__all__ = [
    "MESSAGE_TYPES",
    "Alignment",
    "align_messages",
    "chain_key",
    "event_signature",
    "from_the_start",
    "leading_system",
    "overlap",
    "planned_signature",
    "stored_calls",
]

# The event types a message list becomes (capture.hooks); the stored tail is read in these.
MESSAGE_TYPES: tuple[str, ...] = (
    "system",
    "user_message",
    "assistant_message",
    "tool_invocation",
    "tool_result",
)


def _dumps(value: Any) -> str:
    return json.dumps(
        value,
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
        default=repr,  # unserialisable data is refused by build_event, naming its field
    )


def _digest(raw: str) -> str:
    # surrogatepass: invalid text is refused by build_event, not here
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _signature(type_: str, text: str | None, data: Any, metadata: Mapping[str, Any]) -> str:
    text = sent_text(type_, text, data, metadata)
    if type_ == "assistant_message" and not text and data is None:
        # an empty assistant message was once stored with this data: compared (and keyed)
        # as it was then, so the sessions stored then align and keep their ids
        data = {"tool_calls": 0}
    return _dumps([type_, text or "", data, metadata.get("call_id")])


def planned_signature(event: PlannedEvent) -> str:
    """What a planned message is, for comparing with stored ones: kind, text as sent (a
    text rendered from tool calls compares as before it was rendered: tool_calls.sent_text),
    data and (for a tool result) the call it answers. Who sent it is left out: caller-side
    options (user_id, assistant_id, assistant_role) changing between turns do not make a
    message new."""
    return _signature(event.type, event.text, event.data, event.metadata)


def event_signature(event: Event) -> str:
    """`planned_signature` of a stored (or queued) event."""
    # the stored data went through JSON: compare it in the same form
    data = None if event.data is None else json.loads(_dumps(event.data))
    return _signature(event.type, event.text, data, event.metadata)


def overlap(tail: Sequence[str], planned: Sequence[str], *, single: bool) -> int:
    """How many of the planned events were sent before: the longest k with the last k
    signatures of `tail` equal to the first k of `planned`. With `single` (a list of one
    message), the whole list equal to the tail's end counts as new (k = 0): it may be said
    again."""
    n = len(planned)
    for k in range(min(len(tail), n), 0, -1):
        if list(tail[len(tail) - k :]) == list(planned[:k]):
            if k == n and single:
                return 0
            return k
    return 0


def leading_system(planned: Sequence[PlannedEvent]) -> int:
    """How many planned events lead the list as system messages, when others follow."""
    n = 0
    while n < len(planned) and planned[n].type == "system":
        n += 1
    return n if n < len(planned) else 0


def chain_key(previous_id: str | None, signature: str, parent_ids: Sequence[str]) -> str:
    """The idempotency key of a new message: what it is, what caused it and which message
    it follows (None: the first of the session)."""
    raw = _dumps(["chain", previous_id, signature, list(parent_ids)])
    return "messages:" + _digest(raw)


def stored_calls(tail: Sequence[Event]) -> Mapping[str, str]:
    """Tool-call id -> id of the stored invocation, for tool results whose call was sent
    in an earlier list."""
    out: dict[str, str] = {}
    for e in tail:
        if e.type == "tool_invocation" and isinstance(e.data, dict) and "call_id" in e.data:
            out[str(e.data["call_id"])] = e.id
    return out


@dataclass
class Alignment:
    """The list's events: `ids` (one per planned event, stored or new); `sent`, how many
    of them were sent before (`overlap` of them equal to the session's last messages); for
    each new one, its planned index, idempotency key and parents' ids; `retry`: the list
    is a keyed call's retry."""

    ids: list[str] = field(default_factory=list)
    sent: int = 0
    overlap: int = 0
    new: list[tuple[int, str, list[str]]] = field(default_factory=list)
    retry: bool = False


def align_messages(
    planned: Sequence[PlannedEvent],
    *,
    project_id: str,
    session_id: str,
    tail: Sequence[Event],
    first_system: Sequence[Event] = (),
    single: bool = False,
    earlier_calls: Mapping[str, str] | None = None,
    known: int | None = None,
) -> Alignment:
    """Decide which planned events are stored already and give the new ones their keys.

    `tail`: the session's last message events (stored, then queued), oldest first, at least
    as many as `planned`; `first_system`: its first stored system messages, oldest first
    (read only when the list starts with one); `single`: the list is one message, new even
    when it equals the last one stored; `earlier_calls`: tool-call id -> invocation id for
    calls sent before the tail (`stored_calls` of the session's older events); `known`: the
    caller says how many of the first planned events are the tail's last ones (0: all are
    new), nothing is compared.
    """
    sigs = [planned_signature(p) for p in planned]
    out = Alignment()
    head = leading_system(planned) if known is None else 0
    if head and [event_signature(e) for e in first_system[:head]] == sigs[:head]:
        out.ids = [e.id for e in first_system[:head]]
    else:
        head = 0
    if known is None:
        tail_sigs = [event_signature(e) for e in tail[-(len(planned) - head) :]] if tail else []
        k = overlap(tail_sigs, sigs[head:], single=single)
    else:
        k = known
    out.ids += [e.id for e in tail[len(tail) - k :]] if k else []
    out.sent, out.overlap = head + k, k
    previous = out.ids[-1] if k else (tail[-1].id if tail else None)
    calls = {**(earlier_calls or {}), **stored_calls(tail)}
    for i in range(head + k, len(planned)):
        p = planned[i]
        parents = [out.ids[j] for j in p.parents]
        if p.unresolved_call is not None:
            stored = calls.get(p.unresolved_call)
            if stored is None:
                function = function_name(p.unresolved_call)
                if function is not None:
                    raise ValidationError(
                        f"messages[{p.message}].name",
                        f"{function!r} answers no earlier function_call",
                    )
                raise ValidationError(
                    f"messages[{p.message}].tool_call_id",
                    f"{p.unresolved_call!r} matches no earlier tool call",
                )
            parents = [stored]
        elif not parents and previous is not None and p.type != "tool_invocation":
            parents = [previous]  # the list continues the stored conversation
        key = chain_key(previous, sigs[i], parents)
        eid = keyed_event_id(project_id, session_id, key)
        out.ids.append(eid)
        out.new.append((i, key, parents))
        previous = eid
    return out


def from_the_start(
    root: Alignment, present: set[str], forgotten: set[str], tail: Sequence[Event]
) -> Alignment | None:
    """The list as a re-sent history some of whose messages were forgotten, or None.

    `root` is the list aligned as the session's first messages (an empty tail): its ids are
    those the messages got when first sent, so the leading ones the store holds (`present`:
    stored or queued) or keeps tombstones of (`forgotten`) were sent before. Taken only when
    that run covers the session's last message and includes a forgotten one (why the plain
    alignment failed); the forgotten ones are not written again (their tombstones ignore
    them), and the new messages follow the run."""
    n = 0
    while n < len(root.ids) and (root.ids[n] in present or root.ids[n] in forgotten):
        n += 1
    run = set(root.ids[:n])
    if not tail or tail[-1].id not in run or not (run & forgotten):
        return None
    return Alignment(ids=root.ids, sent=n, overlap=n, new=[x for x in root.new if x[0] >= n])
