"""A framework's own form of a message, kept with the event that captured it (LangChain's
and LlamaIndex's message objects), so the message reads back as the framework wrote it."""

from __future__ import annotations

from typing import Any

from ..model import Event

__all__ = ["stored_form"]


def stored_form(event: Event, key: str) -> dict[str, Any] | None:
    """The mapping holding the message's form under `key`: the event's metadata, or its data
    (where earlier versions kept it); None for an event no framework recorded."""
    for where in (event.metadata, event.data):
        if isinstance(where, dict) and isinstance(where.get(key), dict):
            return where
    return None
