"""The names an event's fields go by: the native ones and seed 001's.

Seed 001 (section 3.1) writes a captured event as ``event_id``, ``session_id``,
``event_type``, ``content``, ``timestamp`` and ``parent_event_ids``. The native names are
``type``, ``text`` (or ``data`` for structured content) and ``ts``; ``event_id``,
``session_id`` and ``parent_event_ids`` are the same in both. Both spellings are accepted
wherever an event is captured (`ContextBase.capture`/`record`, `build_event`, the remote
SDK, ``POST /events``); these helpers turn the article's into the native ones, and refuse a
field neither spelling has with the list of those that are.

- ``event_type`` is ``type``;
- ``content`` is ``text`` when it is a string (or bytes), else ``data`` (a dict, a list, a
  number: structured content, stored as JSON and searched by its text);
- ``timestamp`` is ``ts``: epoch seconds, an ISO-8601 string or a ``datetime`` (both
  spellings take all three; a time without a UTC offset is read as UTC).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..errors import ValidationError
from ..validation import check_event_ts, check_finite, either

__all__ = [
    "ARTICLE_NAMES",
    "CAPTURE_FIELDS",
    "capture_fields",
    "check_field_names",
    "event_body",
    "event_time",
    "rest_event_fields",
]

# The article's name -> the native one (content is text or data, see `event_body`).
ARTICLE_NAMES: dict[str, str] = {"event_type": "type", "content": "text", "timestamp": "ts"}

# What `capture` and `record` take besides `project` (and `build_event` besides its
# project_id and limits), in both spellings.
CAPTURE_FIELDS: tuple[str, ...] = (
    "session_id",
    "type",
    "event_type",
    "text",
    "content",
    "data",
    "agent_id",
    "agent_role",
    "task_id",
    "parent_event_ids",
    "refers_to",
    "importance",
    "metadata",
    "ts",
    "timestamp",
    "event_id",
    "idempotency_key",
)


def check_field_names(names: Iterable[str], accepted: Iterable[str], prefix: str = "") -> None:
    """ValidationError naming the first of `names` that is not `accepted`, with the list of
    those that are (and the nearest one, when a name looks misspelt)."""
    known = list(accepted)
    for name in names:
        if name in known:
            continue
        near = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ValidationError(
            f"{prefix}{name}",
            f"is not an event field{hint}; the fields are: {', '.join(known)}",
        )


def capture_fields(
    type: str | None, session_id: str, text: Any, fields: Mapping[str, Any]
) -> dict[str, Any]:
    """`build_event`'s arguments for a `capture(type, session_id=..., text=..., **fields)`
    call (the embedded base's and the remote SDK's): a field that is not an event's is
    refused, naming it, before anything is built or sent."""
    check_field_names(fields, ("project", *CAPTURE_FIELDS))
    return {"type": type, "session_id": session_id, "text": text, **fields}


def event_time(field: str, value: Any) -> float | None:
    """Epoch seconds from epoch seconds, an ISO-8601 string or a datetime (None: not given).
    A time without an offset is UTC, so the answer does not depend on the machine's zone.
    The time must be from 1970 to 2200 (validation.check_event_ts)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError as exc:
            raise ValidationError(
                field,
                f"must be epoch seconds or an ISO-8601 time such as "
                f"'2025-01-31T08:30:00Z' (got {value!r})",
            ) from exc
    if isinstance(value, datetime):
        when: datetime = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return check_event_ts(field, when.timestamp())
    try:
        seconds = check_finite(field, value)
    except ValidationError as exc:
        raise ValidationError(field, f"{exc.message}: epoch seconds or an ISO-8601 time") from exc
    return check_event_ts(field, seconds)


def event_body(text: Any, data: Any, content: Any) -> tuple[Any, Any]:
    """The native (text, data) of an event given `text`/`data` and the article's `content`:
    a string content is the text, any other (structured) content the data. Content that
    differs from the field it stands for, given too, is refused naming both."""
    if content is None:
        return text, data
    if isinstance(content, str | bytes):
        return either("text", text, "content", content), data
    return text, either("data", data, "content", content)


def rest_event_fields(body: Mapping[str, Any], accepted: Iterable[str]) -> dict[str, Any]:
    """A REST event body in native names: `event_type`, `content` and `timestamp` as in
    `build_event`, and `event_id` for the body's `id`. A name that is neither a native
    field (`accepted`) nor the article's is refused, naming it."""
    native = list(accepted)
    check_field_names(body, [*native, *ARTICLE_NAMES, "event_id"])
    out = dict(body)
    if "event_type" in out:
        out["type"] = either("type", out.get("type"), "event_type", out.pop("event_type"))
    if "event_id" in out:
        out["id"] = either("id", out.get("id"), "event_id", out.pop("event_id"))
    if "content" in out:
        text, data = event_body(out.get("text"), out.get("data"), out.pop("content"))
        out.update({k: v for k, v in (("text", text), ("data", data)) if v is not None})
    # a string is read as a time, and a JSON true or false refused (a number field of the
    # body would take it as 1 or 0: a memory dated 1970)
    if "timestamp" in out or isinstance(out.get("ts"), str | bool):
        ts = event_time("ts", out.get("ts"))
        stamp = event_time("timestamp", out.pop("timestamp", None))
        out["ts"] = either("ts", ts, "timestamp", stamp)
    return out
