"""ctxbase: a context base for LLM agents.

    import ctxbase
    cb = ctxbase.open("memory.db", project="shop")
    cb.capture("user_message", session_id="s1", text="把预算控制在5万以内")
"""

from __future__ import annotations

from typing import Any

from .contextbase import ContextBase
from .errors import ConflictError, CtxbaseError, NotFoundError, StorageError, ValidationError
from .model import Entity, Event, Priority, Relation, register_event_type

__all__ = [
    "ConflictError",
    "ContextBase",
    "CtxbaseError",
    "Entity",
    "Event",
    "NotFoundError",
    "Priority",
    "Relation",
    "StorageError",
    "ValidationError",
    "__version__",
    "open",
    "register_event_type",
]

__version__ = "0.1.0"


def open(path: str | None = None, **options: Any) -> ContextBase:
    """Open a context base on a SQLite file (default ./ctxbase.db) or a postgresql:// URL."""
    return ContextBase(path, **options)
