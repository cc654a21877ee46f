"""The tool calls and tool results inside chat messages, and how a call reads as text.

Two wire shapes carry them:

- OpenAI: an assistant message's `tool_calls` ({"id", "function": {"name", "arguments"}},
  the arguments a JSON string) and a later `role="tool"` message naming its `tool_call_id`;
- Anthropic: content lists whose parts are `{"type": "text"}`, `{"type": "tool_use", "id",
  "name", "input"}` (in an assistant message) and `{"type": "tool_result", "tool_use_id",
  "content", "is_error"}` (in the user message that answers);
- OpenAI's deprecated functions: an assistant message's `function_call` ({"name",
  "arguments"}, one a message, no id) and a later `role="function"` message with the
  function's `name` and its result as `content`. The call's id is `function:<name>`
  (`function_call_id`): the same whichever list, window or history, the call is sent in,
  and a result answers the latest unanswered call of its name (in the list, else the
  latest stored).

A call reads as `run_sql(sql="SELECT ...")`: the name, then each argument with its string
values as they are (newlines and any script unescaped), so the words of the arguments are
found by keyword and embedding search. A message made only of tool calls gets that text.

Such a text is rendered from the event's data, and the events carry `TEXT_FROM` in their
metadata: message lists are aligned by what was sent (`sent_text`), not by the rendering, so
sessions stored before the rendering existed still align with a history re-sent now.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ValidationError

__all__ = [
    "TEXT_FROM",
    "TOOL_CALLS",
    "Call",
    "Content",
    "ToolResult",
    "call_text",
    "function_call",
    "function_call_id",
    "function_name",
    "openai_calls",
    "sent_text",
    "split_content",
]

# metadata[TEXT_FROM] == TOOL_CALLS: the event's text was rendered from its tool calls.
TEXT_FROM = "text_from"
TOOL_CALLS = "tool_calls"
_FUNCTION = "function:"  # the call ids of deprecated function calls (function_call_id)


@dataclass
class Call:
    """One tool call: its id (for the result that answers it), name and raw arguments."""

    call_id: str
    name: Any
    arguments: Any


@dataclass
class ToolResult:
    """An Anthropic `tool_result` part: the call it answers, its text, failed or not."""

    call_id: str
    text: str
    error: bool = False


@dataclass
class Content:
    """A message's content split into its text, tool calls and tool results."""

    text: str | None
    calls: list[Call] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)


def _value(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return json.dumps(value, ensure_ascii=False)


def call_text(name: Any, arguments: Any) -> str:
    """`name(key=value, ...)`; arguments that are not a JSON object are shown as sent."""
    label = str(name) if name else "tool"
    args = arguments
    if isinstance(args, str):
        if not args.strip():
            return f"{label}()"
        try:
            args = json.loads(args)
        except ValueError:
            return f"{label}({arguments})"
    if args is None:
        return f"{label}()"
    if isinstance(args, Mapping):
        return f"{label}({', '.join(f'{k}={_value(v)}' for k, v in args.items())})"
    return f"{label}({_value(args)})"


def sent_text(type_: str, text: str | None, data: Any, metadata: Mapping[str, Any]) -> str | None:
    """The text a message event is compared by: its own, or for a text rendered from tool
    calls what the event held before rendering (an assistant message none, an invocation
    `name(<arguments as sent>)`), so old and new events of one message compare equal."""
    if metadata.get(TEXT_FROM) != TOOL_CALLS:
        return text
    if type_ != "tool_invocation" or not isinstance(data, Mapping):
        return None
    args = data.get("arguments")
    shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True)
    return f"{data.get('tool') or 'tool'}({shown})"


def openai_calls(raw: Any, where: str, message: int) -> list[Call]:
    """An OpenAI message's `tool_calls`; a call without an id gets `<message>.<index>`."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValidationError(f"{where}.tool_calls", "must be a list")
    calls = []
    for i, call in enumerate(raw):
        if not isinstance(call, Mapping):
            raise ValidationError(f"{where}.tool_calls[{i}]", "must be an object")
        fn = call.get("function") or {}
        if not isinstance(fn, Mapping):
            raise ValidationError(f"{where}.tool_calls[{i}].function", "must be an object")
        call_id = str(call.get("id") or f"{message}.{i}")
        calls.append(Call(call_id, fn.get("name"), fn.get("arguments")))
    return calls


def function_call_id(name: str) -> str:
    """The call id of a deprecated `function_call` of this name (it carries none)."""
    return f"{_FUNCTION}{name}"


def function_name(call_id: str) -> str | None:
    """The function a `function_call_id` names; None for any other call id."""
    return call_id[len(_FUNCTION) :] if call_id.startswith(_FUNCTION) else None


def function_call(raw: Any, where: str) -> Call | None:
    """An OpenAI message's deprecated `function_call` ({"name", "arguments"}), or None."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValidationError(f"{where}.function_call", "must be an object")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValidationError(f"{where}.function_call.name", "must be a non-empty string")
    return Call(function_call_id(name), name, raw.get("arguments"))


def _part_text(content: Any, where: str) -> str:
    """A tool result's content: a string, or a list whose text parts are kept."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return split_content(content, where, 0).text or ""
    raise ValidationError(where, "must be a string or a list of parts")


def split_content(content: Any, where: str, message: int) -> Content:
    """A message's `content`: a string, null, or a list of parts (strings, text parts,
    Anthropic tool_use and tool_result parts; other parts, such as images, are left out)."""
    if content is None or isinstance(content, str):
        return Content(content)
    if not isinstance(content, list):
        raise ValidationError(f"{where}.content", "must be a string, a list of parts, or null")
    out = Content(None)
    texts: list[str] = []
    for i, part in enumerate(content):
        at = f"{where}.content[{i}]"
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise ValidationError(at, "must be a string or an object")
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "tool_use":
            call_id = str(part.get("id") or f"{message}.{len(out.calls)}")
            out.calls.append(Call(call_id, part.get("name"), part.get("input")))
        elif kind == "tool_result":
            use_id = part.get("tool_use_id")
            if use_id is None:
                raise ValidationError(f"{at}.tool_use_id", "is required for a tool_result")
            text = _part_text(part.get("content"), f"{at}.content")
            out.results.append(ToolResult(str(use_id), text, bool(part.get("is_error"))))
    out.text = "\n".join(texts)
    return out
