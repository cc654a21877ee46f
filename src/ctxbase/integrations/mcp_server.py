"""The MCP server: the tools of integrations/tools.py plus sessions and traces as resources.

Two transports over one server definition:

- stdio (`ctxbase mcp`): one client, the project and agent id from the command line;
- streamable HTTP at `/v1/projects/{project_id}/mcp` of `ctxbase serve`: every request
  carries an API key, checked like any REST request (key -> projects and role), and the
  project comes from the path the key was checked against. Stateless: each request stands
  alone, so no session can outlive a revoked key or switch project.

Built on the low-level `mcp.server.lowlevel.Server`, so the input schemas are exactly the
pydantic models the OpenAI export uses.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import unquote

from . import require

require("mcp", "mcp")

import anyio  # noqa: E402  # after the install hint
from mcp import types  # noqa: E402
from mcp.server.context import ServerRequestContext  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types import INVALID_PARAMS  # noqa: E402

from .. import __version__  # noqa: E402
from ..errors import CtxbaseError, NotFoundError, ValidationError  # noqa: E402
from .tools import TOOLS, ToolScope, run_tool, tool_error  # noqa: E402

__all__ = ["MCP_PATH", "McpHttpEndpoint", "build_server", "run_stdio"]

log = logging.getLogger("ctxbase.mcp")

MCP_PATH = "/v1/projects/{project_id}/mcp"
SESSION_EVENTS = 200  # events a session resource shows, the latest
_STATE_KEY = "ctxbase_tool_scope"

INSTRUCTIONS = (
    "ctxbase is the shared memory of this project's agents. Call search_memory before "
    "answering anything that may have been said or done before; assemble_context at the "
    "start of a task; remember decisions, findings and facts other agents will need."
)

ScopeOf = Callable[[ServerRequestContext[Any, Any]], ToolScope]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _tool(name: str) -> types.Tool:
    spec = TOOLS[name]
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=spec.input_schema(),
        annotations=types.ToolAnnotations(
            read_only_hint=spec.read_only,
            destructive_hint=spec.name == "forget",
            idempotent_hint=spec.read_only,
            open_world_hint=False,
        ),
    )


_RESOURCES = [
    types.Resource(
        name="sessions",
        uri="ctxbase://sessions",
        description="The sessions (conversations) of this project, most recent first.",
        mime_type="application/json",
    )
]
_TEMPLATES = [
    types.ResourceTemplate(
        name="session",
        uri_template="ctxbase://sessions/{session_id}",
        description=f"The last {SESSION_EVENTS} events of one session, oldest first.",
        mime_type="application/json",
    ),
    types.ResourceTemplate(
        name="trace",
        uri_template="ctxbase://traces/{context_id}",
        description="Why an assembled context holds what it holds (see get_trace).",
        mime_type="application/json",
    ),
]


def _read(scope: ToolScope, uri: str) -> Any:
    """The JSON value behind a resource URI (blocking: run off the event loop)."""
    prefix = "ctxbase://"
    path = uri[len(prefix) :] if uri.startswith(prefix) else None
    kind, _, ident = (path or "").partition("/")
    ident = unquote(ident)
    if path == "sessions":
        return run_tool(scope, "list_sessions", {"limit": 1000})["sessions"]
    if kind == "sessions" and ident:
        scope.cb.get_session(ident, project=scope.project_id)
        events = scope.cb.last_events(ident, SESSION_EVENTS, project=scope.project_id)
        return [e.model_dump(mode="json", exclude={"data"}) for e in events]
    if kind == "traces" and ident:
        return scope.cb.get_trace(ident, project=scope.project_id)
    raise NotFoundError("resource", uri)


def build_server(scope_of: ScopeOf) -> Server[Any]:
    """An MCP server whose handlers run against the ToolScope `scope_of` gives a request."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(name) for name in TOOLS])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        scope = scope_of(ctx)
        try:
            result = await anyio.to_thread.run_sync(
                run_tool, scope, params.name, params.arguments or {}
            )
        except Exception as exc:  # the model gets the error to correct, the server lives on
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=_json(tool_error(exc)))],
                is_error=True,
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_json(result))],
            structured_content=result,
        )

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=_RESOURCES)

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=_TEMPLATES)

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            value = await anyio.to_thread.run_sync(_read, scope_of(ctx), uri)
        except CtxbaseError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc), data={"uri": uri}) from exc
        text = types.TextResourceContents(uri=uri, text=_json(value), mime_type="application/json")
        return types.ReadResourceResult(contents=[text])

    return Server(
        "ctxbase",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def run_stdio(scope: ToolScope) -> None:
    """Serve one MCP client over stdin/stdout until it disconnects (`ctxbase mcp`)."""
    server = build_server(lambda ctx: scope)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


# -- streamable HTTP inside `ctxbase serve` ---------------------------------------------------
def _request_scope(ctx: ServerRequestContext[Any, Any]) -> ToolScope:
    request = ctx.request
    state = getattr(request, "scope", {}).get("state", {})
    scope = state.get(_STATE_KEY)
    if not isinstance(scope, ToolScope):  # only reachable if the endpoint is bypassed
        raise ValidationError("request", "no authorised project for this MCP request")
    return scope


class McpHttpEndpoint:
    """The ASGI endpoint for `MCP_PATH`: authenticates like the REST API, then hands the
    request to the MCP transport with the caller's ToolScope in the request state.

    `authorize(scope) -> ToolScope` raises a CtxbaseError (401, 404, 429) for a refused
    request; `lifespan()` must be entered while the endpoint serves."""

    def __init__(self, authorize: Callable[[dict[str, Any]], Any]) -> None:
        self._authorize = authorize
        self.server = build_server(_request_scope)
        self.manager = StreamableHTTPSessionManager(
            app=self.server, stateless=True, json_response=True
        )

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return self.manager.run()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.responses import JSONResponse

        from ..serve.errors import RateLimitedError, error_body

        scope.setdefault("state", {})["route_path"] = MCP_PATH  # the metrics label
        try:
            tool_scope = await self._authorize(scope)
        except CtxbaseError as exc:
            status, body = error_body(exc)
            headers = {}
            if isinstance(exc, RateLimitedError):
                headers["Retry-After"] = str(max(1, round(exc.retry_after)))
            await JSONResponse(body, status_code=status, headers=headers)(scope, receive, send)
            return
        scope.setdefault("state", {})[_STATE_KEY] = tool_scope
        await self.manager.handle_request(scope, receive, send)
