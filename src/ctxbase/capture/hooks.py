"""Turning a plain chat message list (OpenAI's shape, or Anthropic's content parts) into events
with the right causal parents.

Which of the planned events are new, and their ids, is decided against the session's stored
messages (capture.alignment).

Causality: a user or system message follows the message before it; an assistant message is
caused by the tool results since the previous assistant message (or else by the message just
before it); each tool call becomes a `tool_invocation` caused by the assistant message that
made it; a `tool` message (or an Anthropic `tool_result` part) becomes a `tool_result` caused
by the invocation with its call id. OpenAI's deprecated shape is read the same way: an
assistant message's `function_call` ({name, arguments}) is a tool call, and a `function`
message (`name`, `content`) its result, answering the latest unanswered call of that name.
An assistant message made only of tool calls reads as the calls (`run_sql(sql="SELECT
...")`, capture.tool_calls); one with no text and no calls has no text (it is kept as a
turn, and nothing finds it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ValidationError
from ..validation import check_message_list
from .tool_calls import (
    TEXT_FROM,
    TOOL_CALLS,
    call_text,
    function_call,
    function_call_id,
    openai_calls,
    split_content,
)

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


def plan_message_events(
    messages: Sequence[Mapping[str, Any]],
    *,
    user_id: str = "user",
    assistant_id: str = "assistant",
    assistant_role: str | None = None,
) -> list[PlannedEvent]:
    check_message_list(messages)
    planned: list[PlannedEvent] = []
    last_index: int | None = None
    tool_results_since_assistant: list[int] = []
    invocation_by_call: dict[str, int] = {}
    # function name -> its invocations (deprecated `function_call`) not answered yet, in order
    open_functions: dict[str, list[int]] = {}

    def result(
        call_id: str, text: str, agent: str, metadata: dict[str, Any], answers: int | None = None
    ) -> None:
        parent = invocation_by_call.get(call_id) if answers is None else answers
        planned.append(
            PlannedEvent(
                "tool_result",
                text,
                agent_id=agent,
                agent_role="tool",
                parents=[] if parent is None else [parent],
                metadata={"call_id": call_id, **metadata},
                unresolved_call=call_id if parent is None else None,
            )
        )
        tool_results_since_assistant.append(len(planned) - 1)

    for n, msg in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(msg, Mapping):
            raise ValidationError(where, "must be an object with a role")
        role = msg.get("role")
        content = split_content(msg.get("content"), where, n)
        text = content.text
        name = msg.get("name")
        if role == "system" or role == "developer":
            # The previous message is a parent, so a repeated identical message (the same
            # reminder, "continue" twice) gets its own id instead of merging with the first.
            parents = [last_index] if last_index is not None else []
            planned.append(PlannedEvent("system", text or "", agent_id="system", parents=parents))
        elif role == "user":
            # Anthropic: the results of the assistant's tool calls come in a user message
            for r in content.results:
                result(r.call_id, r.text, "tool", {"error": True} if r.error else {})
            if not content.results or (text and text.strip()):
                parents = [len(planned) - 1] if planned else []
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
            calls = openai_calls(msg.get("tool_calls"), where, n) + content.calls
            legacy = function_call(msg.get("function_call"), where)
            if legacy is not None:
                calls.append(legacy)
            agent = str(name or assistant_id)
            if text and text.strip():
                said: PlannedEvent = PlannedEvent("assistant_message", text)
            elif calls:  # a turn made only of tool calls reads as the calls
                said = PlannedEvent(
                    "assistant_message",
                    "\n".join(call_text(c.name, c.arguments) for c in calls),
                    data={"tool_calls": len(calls)},
                    metadata={TEXT_FROM: TOOL_CALLS},
                )
            else:  # an empty turn: kept as a turn, with nothing to find it by
                said = PlannedEvent("assistant_message", text or None)
            said.agent_id, said.agent_role, said.parents = agent, assistant_role, parents
            planned.append(said)
            me = len(planned) - 1
            tool_results_since_assistant = []
            for call in calls:
                planned.append(
                    PlannedEvent(
                        "tool_invocation",
                        call_text(call.name, call.arguments),
                        data={
                            "tool": call.name,
                            "arguments": call.arguments,
                            "call_id": call.call_id,
                        },
                        agent_id=agent,
                        agent_role=assistant_role,
                        parents=[me],
                        metadata={TEXT_FROM: TOOL_CALLS},
                    )
                )
                invocation_by_call[call.call_id] = len(planned) - 1
            if legacy is not None:  # its invocation is the last one
                open_functions.setdefault(str(legacy.name), []).append(len(planned) - 1)
        elif role == "tool":
            raw_call_id = msg.get("tool_call_id")
            if raw_call_id is None:
                raise ValidationError(f"{where}.tool_call_id", "is required for role 'tool'")
            result(str(raw_call_id), text or "", str(name or "tool"), {})
        elif role == "function":  # the deprecated result of a `function_call`
            if not isinstance(name, str) or not name:
                raise ValidationError(f"{where}.name", "is required for role 'function'")
            waiting = open_functions.get(name)
            answers = waiting.pop() if waiting else None
            result(function_call_id(name), text or "", name, {}, answers)
        else:
            raise ValidationError(f"{where}.role", f"unknown role {role!r}")
        for event in planned[0 if last_index is None else last_index + 1 :]:
            event.message = n
        last_index = len(planned) - 1
    return planned
