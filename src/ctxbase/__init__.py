"""ctxbase: a context base for LLM agents.

import ctxbase
cb = ctxbase.open("memory.db", project="shop")
cb.capture("user_message", session_id="s1", text="把预算控制在5万以内")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ConflictError, CtxbaseError, NotFoundError, StorageError, ValidationError
from .lazy_names import lazy_names

if TYPE_CHECKING:
    from .contextbase import ContextBase
    from .model import Entity, Event, Priority, Relation, register_event_type
    from .serve.sdk import AsyncClient, Client

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
    "connect",
    "connect_async",
    "open",
    "register_event_type",
]

__version__ = "0.1.0"

# Loaded on first use, so `import ctxbase` (and `ctxbase --help`) stays cheap: the facade
# imports every layer, and the model pydantic.
_LAZY = {
    "ContextBase": "contextbase",
    "Entity": "model",
    "Event": "model",
    "Priority": "model",
    "Relation": "model",
    "register_event_type": "model",
}


if not TYPE_CHECKING:  # mypy reads the imports above; an unknown name stays an error
    __getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)


def open(path: str | None = None, **options: Any) -> ContextBase:
    """Open a context base on a SQLite file (default ./ctxbase.db) or a postgresql:// URL.
    `project_id=` (the seed articles' word) is accepted for `project=`; seed 000's
    `nebula_config=` / `milvus_config=` are ignored with a warning (open_options)."""
    from .contextbase import ContextBase
    from .open_options import check_embedded_options, without_storage_settings

    options = without_storage_settings(options, "ctxbase.open")
    check_embedded_options(options)
    return ContextBase(path, **_project_alias(options))


def _project_alias(options: dict[str, Any]) -> dict[str, Any]:
    if "project_id" not in options:
        return options
    out = dict(options)
    alias = out.pop("project_id")
    if "project" in out and out["project"] != alias:
        raise ValidationError(
            "project_id", f"{alias!r} differs from project={out['project']!r}: give one"
        )
    out["project"] = alias
    return out


def connect(url: str, *, api_key: str | None = None, **options: Any) -> Client:
    """A context base on a ctxbase server, with the methods of `open` (needs the server
    extras: pip install 'ctxbase[server]'). The options that set how the base stores and
    embeds (chunking, embedder, ...) are the server's: ValidationError naming the option
    (open_options)."""
    from .open_options import without_storage_settings
    from .serve.sdk import connect as _connect

    options = without_storage_settings(options, "ctxbase.connect")
    return _connect(url, api_key=api_key, **_project_alias(options))


def connect_async(url: str, *, api_key: str | None = None, **options: Any) -> AsyncClient:
    """The asyncio version of `connect`: the same methods, awaited."""
    from .open_options import without_storage_settings
    from .serve.sdk import connect_async as _connect_async

    options = without_storage_settings(options, "ctxbase.connect_async")
    return _connect_async(url, api_key=api_key, **_project_alias(options))
