"""The assemble request's cache key and computation, and the cached-answer shortcut.

`POST /v1/context/assemble` is the hot path: agents ask for their context on every turn,
and most asks repeat one already assembled. The FastAPI route (routes_context.py) is the
full path; `AssembleShortcut` answers a repeat straight from the cache at the ASGI level,
skipping routing, dependency resolution and response validation, which otherwise cost
most of the CPU of a cached answer. It runs only over stores whose reads never wait, and
answers only when every check passes: a body that validates, a valid key, a visible
project, a rate-limit token, a cached entry. Anything else (a miss, a bad body, an
unknown key, an error) goes to the route with the body replayed, so errors and the first
assembly look exactly the same.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from pydantic import ValidationError as PydanticValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import CtxbaseError, ValidationError
from .auth import Principal, local_principal, presented_token
from .cache import Cached
from .keys import recall_key, role_allows, verify_key
from .runtime import Runtime
from .schemas import AssembleIn

__all__ = [
    "ASSEMBLE_PATH",
    "AssembleShortcut",
    "assembly_key",
    "check_server_key",
    "compute_assembly",
]

ASSEMBLE_PATH = "/v1/context/assemble"
# Bodies above this go to the route directly (a real assemble request is a few hundred bytes).
_SHORTCUT_MAX_BODY = 64 * 1024


def check_server_key(project_id: str, require_signature: bool) -> None:
    """`require_signature` on a server without an HMAC key for the project: a REST client
    passes no key of its own (only the server's is used), so the message names the server's."""
    from ..anchor.signing import project_key

    if require_signature and project_key(project_id, None) is None:
        raise ValidationError(
            "require_signature",
            "the server has no HMAC key (set CTXBASE_HMAC_KEY, or "
            "CTXBASE_HMAC_KEY_<PROJECT>, where it runs)",
        )


def assembly_key(body: AssembleIn, generation: int) -> Hashable:
    """Everything in the request that changes the answer, and the index generation."""
    return (
        body.agent_role,
        body.user_intent,
        body.session_id,
        body.task_id,
        body.max_tokens,
        body.debug,
        body.include_trace,
        body.require_signature,
        None if body.repos is None else tuple(sorted(set(body.repos))),
        body.strategy,
        body.memory_scope,
        body.user_id,
        generation,
    )


def compute_assembly(rt: Runtime, body: AssembleIn) -> Cached:
    """Assemble the context and serialise the response body once, for every reuse."""
    with rt.assemble_slots:
        return _assemble(rt, body)


def _assemble(rt: Runtime, body: AssembleIn) -> Cached:
    if body.project_id is None:  # the route fills it in from the key before assembling
        raise ValidationError("project_id", "is missing")
    check_server_key(body.project_id, body.require_signature)
    ctx = rt.cb.assemble_context(
        project_id=body.project_id,
        agent_role=body.agent_role,
        user_intent=body.user_intent,
        session_id=body.session_id,
        max_tokens=body.max_tokens,
        task_id=body.task_id,
        debug=body.debug,
        require_signature=body.require_signature,
        repos=body.repos,
        strategy=body.strategy,
        new_project=True,  # the route has refused an unknown project unless the body allows it
        memory_scope=body.memory_scope,
        user_id=body.user_id,
    )
    _count_monitoring(rt, ctx.trace.get("monitoring") or {})
    out: dict[str, Any] = {**ctx.payload(), "max_tokens": ctx.max_tokens}
    if body.include_trace:
        out["trace"] = ctx.trace
    raw = json.dumps(out, ensure_ascii=False, default=str).encode("utf-8")
    return Cached(ctx.context_id, raw)


def _count_monitoring(rt: Runtime, seen: dict[str, Any]) -> None:
    """Seed 002's monitoring points, summed over computed assemblies: the hit rate is
    memory_hits / assemblies, the injected share injected / prompt tokens."""
    m = rt.metrics
    m.inc(
        "ctxbase_assemble_memory_hits_total"
        if seen.get("memory_hit")
        else "ctxbase_assemble_fallbacks_total"
    )
    m.inc("ctxbase_assemble_memory_tokens_total", float(seen.get("memory_tokens", 0)))
    m.inc("ctxbase_assemble_prompt_tokens_total", float(seen.get("prompt_tokens", 0)))
    m.inc("ctxbase_assemble_retrieval_seconds_total", float(seen.get("retrieval_ms", 0.0)) / 1000)


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope["headers"]:
        if k == name:
            return bytes(v).decode("latin-1")
    return None


def _known_principal(rt: Runtime, scope: Scope) -> Principal | None:
    """The caller, when known; None sends the request to the route (which answers 401)."""
    if rt.settings.no_auth:
        try:
            return local_principal(scope.get("client"))
        except CtxbaseError:  # the route answers it (403)
            return None
    try:
        token = presented_token(_header(scope, b"authorization"), _header(scope, b"x-api-key"))
    except CtxbaseError:
        return None
    # Only reached for stores whose reads never wait, so a key not verified within its TTL
    # is read here rather than by every request that arrives until the route re-verifies it.
    record = recall_key(rt.cb.store, token) or verify_key(rt.cb.store, token)
    return None if record is None else Principal.from_key(record)


class AssembleShortcut:
    """ASGI middleware: cached assemble answers without the FastAPI route (see module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        rt = self._runtime(scope)
        if rt is None:
            await self.app(scope, receive, send)
            return
        body, complete = await _read_body(receive)
        if complete and await self._answer(rt, scope, body, send):
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": not complete}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    def _runtime(scope: Scope) -> Runtime | None:
        """The runtime when this request may be answered here, else None."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != ASSEMBLE_PATH:
            return None
        app = scope.get("app")
        rt: Runtime | None = getattr(getattr(app, "state", None), "runtime", None)
        if rt is None or not rt.cache.enabled or not rt.cb.store.reads_never_wait:
            return None
        length = _header(scope, b"content-length")
        if length is None or not length.isdigit() or int(length) > _SHORTCUT_MAX_BODY:
            return None
        return rt

    async def _answer(self, rt: Runtime, scope: Scope, raw: bytes, send: Send) -> bool:
        try:
            cached = self._hit(rt, scope, raw)
        except Exception:  # a failing store, a closing server: the route answers properly
            return False
        if cached is None:
            return False
        await send_cached(send, cached)
        return True

    @staticmethod
    def _hit(rt: Runtime, scope: Scope, raw: bytes) -> Cached | None:
        try:
            body = AssembleIn.model_validate_json(raw)
        except PydanticValidationError:
            return None
        who = _known_principal(rt, scope)
        pid = body.project_id
        if pid is None or who is None or not who.sees(pid) or not role_allows(who.role, "read"):
            return None
        key = assembly_key(body, rt.cb.store.index_generation(pid))
        cached = rt.cache.lookup(pid, key, lambda: compute_assembly(rt, body))
        if cached is None or not rt.limiter.try_take(str(who.key_id)):
            return None
        state = scope.setdefault("state", {})
        state["key_id"] = who.key_id
        state["route_path"] = ASSEMBLE_PATH
        rt.cache.count_hit()
        rt.metrics.inc("ctxbase_assemble_cache_hits_total")
        return cached


async def send_cached(send: Send, cached: Cached) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(cached.body)).encode("latin-1")),
                (b"x-context-id", cached.context_id.encode("latin-1")),
            ],
        }
    )
    await send({"type": "http.response.body", "body": cached.body})


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The request body up to the shortcut's size; `complete` is False when more remains
    (or the client left), in which case the route reads the rest."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True
        if size > _SHORTCUT_MAX_BODY:
            return b"".join(chunks), False
