"""The history layer's turns: the session's messages in scope and in time order, the ones
out of prompts (retracted, expired, per-turn results of earlier turns) left out with why,
and the latest input told apart from the turns (only an unanswered user message is it).
A tool result captured again under the same call (a hook that fired twice, a retry) is
stored twice, as every capture is; the history says it once and names the repeat in its
drops. Another agent's thoughts are its own: an agent sees what the others said and did,
not how they reasoned (seed 003 5.2: an executor reading the planner's internal reasoning
confused its output). Pure: events and statuses in, turns out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..model import Event
from .history_calls import CALL_TYPE, fold_calls
from .history_fallback import THOUGHT_TYPE
from .lifecycle import Status
from .turn_roles import other_agent

__all__ = ["HISTORY_TYPES", "OTHERS_THOUGHT", "history_turns"]

# the turns of the history; a thought is one too, the first to go under budget pressure
# (history_fallback.py)
HISTORY_TYPES = (
    "user_message",
    "assistant_message",
    "tool_invocation",
    "tool_result",
    "system",
    "internal_thought",
)


# the drop reason of another agent's thought (the assembly keeps it out of memory too)
OTHERS_THOUGHT = "another agent's thought"


def history_turns(
    events: Sequence[Event],
    statuses: Mapping[str, Status],
    task_id: str | None,
    view: str,
    intent: str,
    viewer: str | None = None,
) -> tuple[list[Event], list[dict[str, Any]], str | None, dict[str, str]]:
    """The session's messages in scope, minus retracted and expired ones and the input,
    with each tool call in its assistant message's entry (history_calls; the folded
    calls are returned with their message's id).

    The input is the newest user message whose text is the intent, unless it was
    answered (a later user message or an assistant message that is not a tool call's
    follows it in scope): an answered question keeps its place, before its answer.

    `viewer`: the assembling agent's role; the thoughts of any other agent are left out
    (a thought of no recorded role, or of the viewer, stays)."""
    dropped: list[dict[str, Any]] = []
    user_seqs = [e.seq or 0 for e in events if e.type == "user_message"]
    last_user = max(user_seqs, default=-1)
    input_event = next(
        (
            e.id
            for e in reversed(events)
            if e.type == "user_message" and (e.text or "").strip() == intent.strip()
        ),
        None,
    )
    kept: list[Event] = []
    results: dict[tuple[Any, ...], str] = {}  # a call's result -> the first event saying it
    for e in events:
        if e.type not in HISTORY_TYPES:
            continue
        if (
            task_id is not None
            and e.task_id != task_id
            and (view == "subtask" or e.task_id is not None)
        ):
            continue  # another task's message: switch_task scoped it out
        if (
            viewer is not None
            and e.type == THOUGHT_TYPE
            and (other := other_agent(e, viewer)) is not None
        ):
            dropped.append(
                {
                    "id": e.id,
                    "layer": "history",
                    "reason": OTHERS_THOUGHT,
                    "detail": f"internal_thought of {other}",
                }
            )
            continue
        status = statuses.get(e.id, Status.ACTIVE)
        if e.id == input_event:
            if status == Status.ACTIVE:
                kept.append(e)  # its place, should it turn out answered
            continue
        if status != Status.ACTIVE:
            reason = "retracted" if status == Status.EXPIRED else str(status)
            dropped.append(
                {"id": e.id, "layer": "history", "reason": reason, "detail": "message status"}
            )
        elif e.type == "tool_result" and e.metadata.get("per_turn") and (e.seq or 0) < last_user:
            dropped.append(
                {
                    "id": e.id,
                    "layer": "history",
                    "reason": "expired",
                    "detail": "per-turn tool result; a later turn began",
                }
            )
        elif (first := _first_of(e, results)) is not None:
            dropped.append(
                {
                    "id": e.id,
                    "layer": "history",
                    "reason": "repeat",
                    "detail": f"the same result of {e.parent_event_ids[0]} as {first}",
                }
            )
        else:
            kept.append(e)
    at = next((i for i, e in enumerate(kept) if e.id == input_event), None)
    if at is not None:
        if _answered(kept[at + 1 :], events):
            input_event = None
        else:
            del kept[at]
    reasons = {d["id"]: d["reason"] for d in dropped}
    folded = fold_calls(kept, reasons)  # a call goes with its message
    dropped += [
        {"id": c, "layer": "history", "reason": reasons[m], "detail": f"a call of {m}"}
        for c, m in folded.gone.items()
    ]
    return folded.events, dropped, input_event, folded.held


def _first_of(event: Event, results: dict[tuple[Any, ...], str]) -> str | None:
    """The id of an earlier tool result of the same call with the same content, if any
    (else `event` is recorded as the first). A result without a call is never a repeat."""
    if event.type != "tool_result" or not event.parent_event_ids:
        return None
    data = json.dumps(event.data, sort_keys=True, ensure_ascii=False)
    key = (tuple(event.parent_event_ids), (event.text or "").strip(), data)
    if key in results:
        return results[key]
    results[key] = event.id
    return None


def _answered(after: Sequence[Event], events: Sequence[Event]) -> bool:
    """Whether the turns `after` a user message answer it: a later user message, or an
    assistant message that is not (only) a tool call's (an agent still working on the
    question has not answered it)."""
    callers = {p for e in events if e.type == CALL_TYPE for p in e.parent_event_ids}
    return any(
        e.type == "user_message" or (e.type == "assistant_message" and e.id not in callers)
        for e in after
    )
