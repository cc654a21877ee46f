"""Turning a plain OpenAI-style message list into events with the right causal parents.

Which of the planned events are new, and their ids, is decided against the session's stored
messages (capture.alignment).

Causality: a user or system message follows the message before it; an assistant message is
caused by the tool results since the previous assistant message (or else by the message just
before it); each tool call becomes a `tool_invocation` caused by the assistant message that
made it; a `tool` message becomes a `tool_result` caused by the invocation with its call id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ValidationError

__all__ = ["PlannedEvent", "plan_message_events"]


@dataclass
class PlannedEvent:
    """An event to capture; parents are indexes into the planned list (resolved to ids)."""

    type: str
    text: str | None
    data: Any = None
    agent_id: str = "agent"
    agent_role: str | None = None
    parents: list[int] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    # a tool result whose call is not in the list: resolved against the stored messages
    unresolved_call: str | None = None
    message: int = 0  # the index of the message it comes from


def _content_text(content: Any, where: str) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # multi-part content: keep the text parts
        parts = []
        for i, part in enumerate(content):
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
            elif not isinstance(part, Mapping):
                raise ValidationError(f"{where}.content[{i}]", "must be a string or an object")
        return "\n".join(parts)
    raise ValidationError(f"{where}.content", "must be a string, a list of parts, or null")


def plan_message_events(
    messages: Sequence[Mapping[str, Any]],
    *,
    user_id: str = "user",
    assistant_id: str = "assistant",
    assistant_role: str | None = None,
) -> list[PlannedEvent]:
    planned: list[PlannedEvent] = []
    last_index: int | None = None
    tool_results_since_assistant: list[int] = []
    invocation_by_call: dict[str, int] = {}
    for n, msg in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(msg, Mapping):
            raise ValidationError(where, "must be an object with a role")
        role = msg.get("role")
        text = _content_text(msg.get("content"), where)
        name = msg.get("name")
        if role == "system" or role == "developer":
            # The previous message is a parent, so a repeated identical message (the same
            # reminder, "continue" twice) gets its own id instead of merging with the first.
            parents = [last_index] if last_index is not None else []
            planned.append(PlannedEvent("system", text or "", agent_id="system", parents=parents))
        elif role == "user":
            parents = [last_index] if last_index is not None else []
            planned.append(
                PlannedEvent(
                    "user_message",
                    text or "",
                    agent_id=str(name or user_id),
                    agent_role="user",
                    parents=parents,
                )
            )
        elif role == "assistant":
            if tool_results_since_assistant:
                parents = list(tool_results_since_assistant)
            else:
                parents = [last_index] if last_index is not None else []
            tool_calls = msg.get("tool_calls") or []
            if not isinstance(tool_calls, list):
                raise ValidationError(f"{where}.tool_calls", "must be a list")
            planned.append(
                PlannedEvent(
                    "assistant_message",
                    text if text else None,
                    data=None if text else {"tool_calls": len(tool_calls)},
                    agent_id=str(name or assistant_id),
                    agent_role=assistant_role,
                    parents=parents,
                )
            )
            me = len(planned) - 1
            tool_results_since_assistant = []
            for i, call in enumerate(tool_calls):
                if not isinstance(call, Mapping):
                    raise ValidationError(f"{where}.tool_calls[{i}]", "must be an object")
                fn = call.get("function") or {}
                call_id = str(call.get("id") or f"{n}.{i}")
                args = fn.get("arguments")
                shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                planned.append(
                    PlannedEvent(
                        "tool_invocation",
                        f"{fn.get('name', 'tool')}({shown})",
                        data={"tool": fn.get("name"), "arguments": args, "call_id": call_id},
                        agent_id=str(name or assistant_id),
                        agent_role=assistant_role,
                        parents=[me],
                    )
                )
                invocation_by_call[call_id] = len(planned) - 1
        elif role == "tool":
            raw_call_id = msg.get("tool_call_id")
            if raw_call_id is None:
                raise ValidationError(f"{where}.tool_call_id", "is required for role 'tool'")
            call_id = str(raw_call_id)
            parent = invocation_by_call.get(call_id)
            planned.append(
                PlannedEvent(
                    "tool_result",
                    text or "",
                    agent_id=str(name or "tool"),
                    agent_role="tool",
                    parents=[] if parent is None else [parent],
                    metadata={"call_id": str(call_id)},
                    unresolved_call=call_id if parent is None else None,
                )
            )
            tool_results_since_assistant.append(len(planned) - 1)
        else:
            raise ValidationError(f"{where}.role", f"unknown role {role!r}")
        for event in planned[0 if last_index is None else last_index + 1 :]:
            event.message = n
        last_index = len(planned) - 1
    return planned
