"""What `ctxbase.open` and `ctxbase.connect` accept: one list for both.

Both take `project` (or `project_id`), `agent_id` and `debug_mode`. A remote client does
what its server does, so the options that set how a base stores, cuts, embeds and anchors
what it is given belong to the server (`ctxbase serve` flags, `ServerSettings`): `connect`
refuses each of them by name, saying where it is set (ValidationError, field = the option),
instead of a TypeError. `open` refuses the remote client's own options (`api_key`,
`timeout`, `retries`, `backoff`, `capture_timeout`) the same way. Any other unknown
keyword stays a TypeError.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .errors import ValidationError

__all__ = [
    "REMOTE_ONLY",
    "SERVER_SIDE",
    "check_embedded_options",
    "check_remote_options",
    "without_storage_settings",
]

log = logging.getLogger("ctxbase")

# The embedded options a server decides for its clients, and where a server sets them.
SERVER_SIDE: Mapping[str, str] = {
    "chunking": "ctxbase serve --chunking / --chunk-tokens / --chunk-overlap, "
    "ServerSettings(chunking=...)",
    "embedder": "ctxbase serve --embedder, ServerSettings(embedder=...)",
    "background_embedding": "ServerSettings(background_embedding=...)",
    "query_batching": "ServerSettings(query_batching=...)",
    "query_embed_timeout_s": "ServerSettings(query_embed_timeout_s=...)",
    "model_start_timeout_s": "ServerSettings(model_start_timeout_s=...)",
    "policies": "ctxbase serve --policies, ServerSettings(policies=...)",
    "session_idle_timeout_s": "ctxbase serve --session-idle-timeout, "
    "ServerSettings(session_idle_timeout_s=...)",
    "anchoring": "the server's environment, CTXBASE_EXTRACT_* for LLM extraction",
    "query_rewrite": "the server's environment, CTXBASE_REWRITE_BASE_URL / _MODEL / _API_KEY",
    "max_content_bytes": "its request limit, ctxbase serve --max-body-bytes",
    "bus_config": "no ctxbase serve flag or ServerSettings field sets its capture queue, "
    "which keeps the defaults; an app of your own sets it with "
    "create_app(cb=ContextBase(..., bus_config=...))",
}
# The options no server setting changes: the message says how instead of "set it there".
_NO_SETTING = frozenset({"bus_config"})

# The remote client's own options: an embedded base calls no server.
REMOTE_ONLY: tuple[str, ...] = ("api_key", "timeout", "retries", "backoff", "capture_timeout")


def check_remote_options(options: Mapping[str, Any]) -> None:
    """ValidationError naming the first option of `options` that only a server sets."""
    for name in options:
        if name in SERVER_SIDE:
            where = SERVER_SIDE[name]
            how = where if name in _NO_SETTING else f"set it there ({where})"
            raise ValidationError(
                name,
                f"is decided by the server a remote client talks to: {how}; "
                "an embedded base (ctxbase.open) takes it itself",
            )


def check_embedded_options(options: Mapping[str, Any]) -> None:
    """ValidationError naming the first option of `options` that only a remote client has."""
    for name in options:
        if name in REMOTE_ONLY:
            raise ValidationError(
                name,
                "is an option of a remote client (ctxbase.connect); an embedded base "
                "calls no server",
            )


def without_storage_settings(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`options` without seed 000's graph and vector store settings (`PowerContextClient(
    project_id=..., nebula_config=..., milvus_config=...)`), each logged as ignored."""
    from .assemble.policy_storage import STORAGE_KEYS

    for key in options:
        if key in STORAGE_KEYS:
            log.warning(
                "%s: %s is ignored: ctxbase keeps the graph and the vectors in its own store "
                "(SQLite or PostgreSQL), so %s needs no settings",
                where,
                key,
                STORAGE_KEYS[key],
            )
    return {k: v for k, v in options.items() if k not in STORAGE_KEYS}
