"""The MCP endpoint of the service, `/v1/projects/{project_id}/mcp` (streamable HTTP).

Each request is checked exactly like a REST request: the API key (Bearer or X-API-Key),
its rate limit, and that the key may see the project in the path (404 otherwise). The
tools then run with the key's role (remember needs write, a hard forget admin) and write
as the key's agent, `key:<key id>`, as REST does (`keys.key_agent`). Without the `mcp`
extra the endpoint is simply absent.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers

from ..model import check_id
from .auth import LOCAL_PRINCIPAL, presented_token, principal_of
from .errors import AuthenticationError
from .keys import key_agent, recall_key, verify_key
from .logs import LOGGER_NAME
from .runtime import Runtime

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..integrations.mcp_server import McpHttpEndpoint
    from ..integrations.tools import ToolScope

__all__ = ["authorize", "mount_mcp"]

log = logging.getLogger(LOGGER_NAME)


async def authorize(scope: dict[str, Any]) -> ToolScope:
    """The ToolScope of one MCP request, or the CtxbaseError that refuses it."""
    from ..integrations.tools import ToolScope

    rt: Runtime = scope["app"].state.runtime
    project = check_id("project_id", str(scope.get("path_params", {}).get("project_id", "")))
    agent_id = "mcp"
    if rt.settings.no_auth:
        who = LOCAL_PRINCIPAL
    else:
        headers = Headers(scope=scope)
        store = rt.cb.store
        try:
            token = presented_token(headers.get("authorization"), headers.get("x-api-key"))
            record = recall_key(store, token)
            if record is None:
                record = await run_in_threadpool(verify_key, store, token)
            who = principal_of(record)
        except AuthenticationError:
            rt.metrics.inc("ctxbase_auth_failures_total")
            raise
        scope.setdefault("state", {})["key_id"] = who.key_id  # for the access log
        try:
            rt.limiter.take(str(who.key_id))
        except Exception:
            rt.metrics.inc("ctxbase_rate_limited_total")
            raise
        assert record is not None  # principal_of refused None
        agent_id = key_agent(record.key_id)  # as REST writes it: one key is one agent
    who.check(project, "read")
    return ToolScope(
        rt.cb, project=project, agent_id=agent_id, role=who.role, on_write=rt.cache.invalidate
    )


def mount_mcp(app: FastAPI) -> McpHttpEndpoint | None:
    """Add the MCP route to `app`; None (and no route) when the mcp package is missing."""
    try:
        from ..integrations.mcp_server import MCP_PATH, McpHttpEndpoint
    except ImportError:
        log.info("no MCP endpoint: pip install 'ctxbase[mcp]' to serve one")
        return None
    from starlette.routing import Route

    endpoint = McpHttpEndpoint(authorize)
    # A plain ASGI route: the MCP transport reads the request and writes the response itself.
    route = Route(MCP_PATH, endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    app.router.routes.append(route)
    return endpoint
