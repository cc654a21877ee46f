"""The FastAPI application: `create_app(settings)`.

The service is a thin layer: each route parses its input, calls one library function on
the shared ContextBase and maps errors to HTTP (errors.py). The lifespan opens the
ContextBase and closes it at shutdown, which flushes the capture queue.
"""

from __future__ import annotations

import difflib
import functools
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

try:
    import fastapi  # noqa: F401  # fail early with the install hint
except ImportError as exc:
    from ._deps import INSTALL_HINT

    raise ImportError(f"the ctxbase service needs fastapi: {INSTALL_HINT}") from exc

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError as PydanticValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..contextbase import ContextBase
from ..errors import CtxbaseError, ValidationError
from ..integrations.tool_hints import likely_argument
from ..retrieve.term_bridge import load_term_bridge
from ..retrieve.tokenize import load_segmenter
from ..validation import MAX_JSON_DEPTH, constraint_words
from .archive_retention import ArchiveCompactor
from .assembly import AssembleShortcut
from .auth import RateLimiter
from .cache import AssembleCache
from .console import mount_console
from .errors import RateLimitedError, error_body
from .logs import LOGGER_NAME
from .mcp_endpoint import mount_mcp
from .metrics import Metrics
from .middleware import ServiceMiddleware
from .query_params import reject_unknown_query
from .retention import RetentionPurger
from .routes_capture import event_reads
from .routes_capture import router as capture_router
from .routes_context import router as context_router
from .routes_graph import router as graph_router
from .routes_kb import router as kb_router
from .routes_lifecycle import router as lifecycle_router
from .routes_manager import router as manager_router
from .routes_ops import router as ops_router
from .runtime import COUNTER_HELP, Runtime
from .settings import ENV_SETTINGS, ServerSettings, check_settings

__all__ = ["create_app", "create_app_from_env"]

log = logging.getLogger(LOGGER_NAME)


def _field(loc: tuple[Any, ...], sourced: bool = True) -> str:
    # A request error's loc starts with where the input came from; a field of the body may
    # itself be called "query" or "path", so only that first part is dropped.
    source = ("body", "query", "path", "header")
    parts = list(loc[1:] if sourced and loc and loc[0] in source else loc) or ["body"]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


@functools.cache
def _known_fields() -> tuple[str, ...]:
    """Every field name of the API's request bodies: what an unknown one may be a typo of."""
    from pydantic import BaseModel

    from . import schemas

    models = [m for m in vars(schemas).values() if isinstance(m, type)]
    fields = {name for m in models if issubclass(m, BaseModel) for name in m.model_fields}
    return tuple(sorted(fields))


def _body_fields(request: Request) -> tuple[str, ...] | None:
    """The fields of the body model of the route a request matched (None: not known)."""
    from pydantic import BaseModel

    info = getattr(getattr(request.scope.get("route"), "body_field", None), "field_info", None)
    model = getattr(info, "annotation", None)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return tuple(model.model_fields)
    return None


def _validation_response(
    errors: list[Any],
    sourced: bool = True,
    content_type: str | None = None,
    fields: tuple[str, ...] | None = None,
) -> JSONResponse:
    # a library check's own words first: it says what FastAPI's generic errors do not
    # ("key goes in the query string", beside "key: is missing")
    ours = [e for e in errors if isinstance((e.get("ctx") or {}).get("error"), ValidationError)]
    first = (ours or errors or [{"loc": ("body",), "msg": "invalid request"}])[0]
    loc = tuple(first.get("loc", ("body",)))
    field = _field(loc, sourced)
    msg = str(first.get("msg", "invalid"))
    ctx = first.get("ctx")
    if isinstance(ctx, dict) and isinstance(ctx.get("error"), ValidationError):
        msg = ctx["error"].message  # a library check: its own words, without the prefix
        if field == "body":  # a check of the whole body names the field it is about
            field = ctx["error"].field
        elif isinstance(loc[-1], int):  # so does a check of one whole item of a list
            field = f"{field}.{ctx['error'].field}"
        elif ctx["error"].field.startswith(f"{field}."):  # a nested model's check, by path
            field = ctx["error"].field
    elif first.get("type") == "missing":
        msg = "is missing"  # the library's words for a required input left out
    elif (words := constraint_words(first)) is not None:
        msg = words  # a bound, a choice, a blank string: as the library says them
    elif first.get("type") == "extra_forbidden" and loc and isinstance(loc[-1], str):
        # the fields of this route's body when known (`ids` on /forget: `event_ids`), by
        # the names other tools use for them first; never the name refused
        top = fields if fields and loc[:1] == ("body",) and len(loc) == 2 else None
        own = [f for f in (top or _known_fields()) if f != loc[-1]]
        near = likely_argument(loc[-1], own, own) if top else None
        if near is None:
            close = difflib.get_close_matches(loc[-1], own, n=1, cutoff=0.8)
            near = close[0] if close else None
        msg = "is not a field here" + (f" (did you mean {near!r}?)" if near else "")
    elif first.get("type") == "json_invalid":
        # FastAPI puts the character offset in loc ("body", 25): name the body, not "[25]".
        field = "body"
        reason = ctx.get("error") if isinstance(ctx, dict) else None
        at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        msg = f"not valid JSON ({reason or 'decode error'}{at})"
    elif loc == ("body",) and content_type and "json" not in content_type.lower():
        # `curl -d` without a JSON content type: the body was not read as JSON at all.
        msg = f"send JSON with 'Content-Type: application/json' (got {content_type!r})"
    return JSONResponse(_invalid(f"{field}: {msg}", field), status_code=422)


def _invalid(message: str, field: str | None) -> dict[str, Any]:
    """A refused request's body, shaped as a library ValidationError's (error_body): the
    `type` and `details` every error body has, so a client reads them alike."""
    return {
        "error": {
            "code": "invalid",
            "message": message,
            "field": field,
            "type": "ValidationError",
            "details": {},
        }
    }


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(CtxbaseError)
    async def _ctxbase_error(request: Request, exc: CtxbaseError) -> JSONResponse:
        status, body = error_body(exc)
        headers = {}
        if isinstance(exc, RateLimitedError):
            headers["Retry-After"] = str(max(1, round(exc.retry_after)))
        return JSONResponse(body, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _request_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type")
        return _validation_response(
            list(exc.errors()), content_type=content_type, fields=_body_fields(request)
        )

    @app.exception_handler(PydanticValidationError)
    async def _model_invalid(request: Request, exc: PydanticValidationError) -> JSONResponse:
        return _validation_response(list(exc.errors()), sourced=False)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
            # FastAPI's JSON parse ran out of stack: say what is wrong with the body
            message = f"body: is nested too deep to read (at most {MAX_JSON_DEPTH} levels)"
            return JSONResponse(_invalid(message, "body"), status_code=422)
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            # bytes that are not UTF-8 text: bad input, said as malformed JSON is
            message = "body: not valid JSON (the body must be UTF-8 text)"
            return JSONResponse(_invalid(message, "body"), status_code=422)
        code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(
            exc.status_code, "http_error"
        )
        field = "body" if exc.status_code == 413 else None
        message = str(exc.detail)
        error: dict[str, Any] = {"code": code, "message": message, "field": field}
        if exc.status_code == 404 and message == "Not Found":  # no route: say which was asked
            error["message"] = (
                f"no such route: {request.method} {request.url.path} (the API's routes start "
                "with /v1/; give the URL `ctxbase serve` prints, without a path; GET "
                "/openapi.json lists them)"
            )
            error.update(type="NotFoundError", details={})
        elif exc.status_code == 405:
            error["message"] = f"{request.method} is not allowed on {request.url.path}"
        body = {"error": error}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", exc_info=exc)
        body = {"error": {"code": "internal", "message": "internal server error", "field": None}}
        return JSONResponse(body, status_code=500)


def _log_policies(path: str, base: ContextBase) -> None:
    """Say at start-up whether the policy file adds to the shipped policies or replaces them."""
    loaded = base.assembler.policies
    how = (
        f"layered over the shipped presets ({', '.join(p.name for p in loaded.presets)})"
        if loaded.presets
        else "replacing the shipped presets (inherit_presets: false)"
    )
    log.info("policies %s: %d of its own, %s", path, len(loaded.policies), how)


def create_app(settings: ServerSettings | None = None, cb: ContextBase | None = None) -> FastAPI:
    """The service over `settings.db` (or over `cb`, which the caller then owns).

    Settings with --no-auth and a host other than the loopback address are refused here,
    so every way of starting the app refuses them; requests from other addresses to an
    app without keys are refused too (whatever address the server was bound to)."""
    settings = check_settings(settings or ServerSettings())
    runtime_box: dict[str, Runtime] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        base = cb or ContextBase(
            settings.db,
            embedder=settings.embedder,
            background_embedding=settings.background_embedding,
            policies=settings.policies,
            session_idle_timeout_s=settings.session_idle_timeout_s,
            query_batching=settings.query_batching,
            query_embed_timeout_s=settings.query_embed_timeout_s,
            model_start_timeout_s=settings.model_start_timeout_s,
            chunking=settings.chunking,
        )
        rt = Runtime(
            settings=settings,
            cb=base,
            limiter=RateLimiter(settings.rate_limit_per_s, settings.rate_limit_burst),
            cache=AssembleCache(settings.assemble_cache_ttl_s, settings.assemble_cache_size),
            metrics=metrics,
        )
        _register_gauges(rt)
        if settings.embedder is not None:
            await run_in_threadpool(lambda: base.embedding_worker)  # load the model now
        # and the Chinese segmenter's and the term bridge's dictionaries (seconds each), off
        # the first request's path
        await run_in_threadpool(load_segmenter)
        await run_in_threadpool(load_term_bridge)
        app.state.runtime = runtime_box["rt"] = rt
        purger = None
        if settings.soft_delete_retention_s is not None:
            purger = RetentionPurger(
                rt, settings.soft_delete_retention_s, settings.soft_delete_purge_interval_s
            ).start()
        app.state.retention = purger
        compactor = None
        if settings.archive_retention_s is not None:
            compactor = ArchiveCompactor(
                rt, settings.archive_retention_s, settings.archive_compact_interval_s
            ).start()
        app.state.archive_retention = compactor
        log.info("serving %s (auth %s)", base.store.url, "off" if settings.no_auth else "on")
        if settings.policies is not None:
            _log_policies(settings.policies, base)
        try:
            if mcp is None:
                yield
            else:
                async with mcp.lifespan():
                    yield
        finally:
            if purger is not None:
                await run_in_threadpool(purger.stop)
            if compactor is not None:
                await run_in_threadpool(compactor.stop)
            if cb is None:
                await run_in_threadpool(base.close)  # flushes the capture queue
            log.info("stopped")

    app = FastAPI(
        title="ctxbase",
        version=__version__,
        description="A shared context base for LLM agents: capture, entities, relations, "
        "search, assembled context and traces, per project.",
        lifespan=lifespan,
    )
    metrics = Metrics(COUNTER_HELP)
    # Added first, so it runs inside ServiceMiddleware (request id, limits, metrics, logs).
    app.add_middleware(AssembleShortcut)
    app.add_middleware(ServiceMiddleware, metrics=metrics, max_body_bytes=settings.max_body_bytes)
    _install_error_handlers(app)
    # The router of the hot path (POST /v1/context/assemble) first: FastAPI tries routers in
    # order, and trying the ~50 routes before it cost ~0.3 ms of CPU per assembly. No path of
    # it is one another router answers, so the order changes which route answers nothing.
    routers = (
        context_router,
        ops_router,
        lifecycle_router,
        manager_router,
        capture_router,
        graph_router,
        kb_router,
    )
    for router in routers:
        # a mistyped query parameter is a 422, not silently the default
        app.include_router(router, dependencies=[Depends(reject_unknown_query)])
    mount_console(app)  # /ui and its read endpoints
    # GET /events/{id} takes the rest of the path: after every longer /events/{id}/... route
    app.include_router(event_reads, dependencies=[Depends(reject_unknown_query)])
    mcp = mount_mcp(app)  # /v1/projects/{project_id}/mcp, when the mcp extra is installed
    return app


def _register_gauges(rt: Runtime) -> None:
    m = rt.metrics
    cb = rt.cb
    m.gauge(
        "ctxbase_capture_queue_depth",
        "Events waiting in the capture queue.",
        lambda: cb.capture_stats().queue_depth,
    )
    m.gauge(
        "ctxbase_capture_dropped_low_priority",
        "Low-priority events dropped under backpressure since start.",
        lambda: cb.capture_stats().dropped_low_priority,
    )
    m.gauge(
        "ctxbase_embed_backlog",
        "Stored items of every project still waiting for a vector (capped at 5000; a"
        " project's own backlog: pending_vectors of POST /v1/embeddings/wait).",
        lambda: 0 if cb.embedding_worker is None else cb.embedding_worker.backlog(),
    )
    m.gauge("ctxbase_assemble_cache_entries", "Cached assemblies.", lambda: len(rt.cache))
    if cb.anchor_stats().llm is not None:  # LLM extraction is configured (see llm_extract.py)
        for count in ("requests", "extracted", "malformed", "errors", "timeouts", "skipped"):
            m.gauge(
                f"ctxbase_anchor_llm_{count}",
                f"LLM entity extraction since start: {count}.",
                partial(_llm_count, cb, count),
            )


def _llm_count(cb: ContextBase, count: str) -> float:
    return float(getattr(cb.anchor_stats().llm, count, 0))


def create_app_from_env() -> FastAPI:
    """Factory for worker processes: settings come as JSON in $CTXBASE_SERVE_SETTINGS."""
    raw = os.environ.get(ENV_SETTINGS)
    return create_app(ServerSettings.model_validate(json.loads(raw)) if raw else None)
